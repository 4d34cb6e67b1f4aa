"""The Hugging Face export of the input continuum (inputs/mapped.py, inputs/spelling.py), offline.

code_map (binary16 or spelling, then a trained linear map or MLP), learned_lowrank (a trained V x r
table times an r x d map) and the spelling code are exported from a test_micro checkpoint whose every
parameter is drawn away from its init (a zero bias or a map at its exact-RMS init would hide a
mapping error), loaded with transformers' own AutoModelForCausalLM (trust_remote_code, the folder
alone) and compared with the workbench model's forward. The spelling code reads the strings of the
test corpus's own tokenizer (what `vocabulary: data` resolves to in a job), put in the input settings
here so that no corpus is prepared again. References are the workbench model, never the code under test.
The folder is then imported back (hub/imported.py decoder_from_hf) into the very workbench Decoder it
came from, and its model card (hub/card.py) must say what the input is: which parts are fixed, which
trained, which token-specific.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from helpers.eval import trained_checkpoint, weight_shapes
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from fixedcode_study.build import build_decoder
from fixedcode_study.config import compose, job_config, resolve_input_references
from fixedcode_study.errors import ConfigError
from fixedcode_study.hub.export import MODELING_FILE, export_checkpoint
from fixedcode_study.hub.imported import decoder_from_hf
from fixedcode_study.hub.source import checkpoint_folder
from fixedcode_study.record.checkpoint import load_checkpoint, save_checkpoint
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.vocabulary import FROM_DATA, token_strings

ATOL = 1e-5
MAPPED = ("binary16_linear", "binary16_mlp", "spelling_mlp")  # code_map
LOWRANK = ("learned_lowrank", "learned_lowrank4")
VARIANTS = (*MAPPED, *LOWRANK, "spelling")
# the map's parameters in the folder, per variant (map.<layer>.<tensor> under model.embed_tokens.)
MAP_TENSORS = {"linear": {"map.proj.weight"}, "mlp": {"map.fc_in.weight", "map.fc_in.bias", "map.proj.weight"}}


def random_ids(vocab: int, T: int = 40) -> torch.Tensor:
    ids = torch.randint(0, vocab, (3, T), generator=torch.Generator().manual_seed(13))
    ids[0, :3] = torch.tensor([0, vocab - 1, vocab // 2])  # both ends of the vocabulary
    return ids


def with_strings(input_cfg: Mapping[str, Any], strings: list[str]) -> dict[str, Any]:
    """`vocabulary: data` (the input's, or its code's) replaced by the tokenizer's strings."""
    cfg = dict(input_cfg)
    if cfg.get("vocabulary") == FROM_DATA:
        cfg["vocabulary"] = list(strings)
    if isinstance(cfg.get("code"), Mapping):
        cfg["code"] = with_strings(cfg["code"], strings)
    return cfg


def randomised_checkpoint(input_name: str, root, seed: int = 5):
    """A test_micro checkpoint of `input_name` with every parameter redrawn (as
    helpers.eval.untrained_checkpoint(randomised=True) does), on the trained test model's tokenizer."""
    _, prepared_root = trained_checkpoint("learned")
    tokenizer_path = prepared_root / "tokenizer.json"
    cfg = job_config(compose(["model=test_micro", f"input={input_name}"]))
    strings = token_strings(Tokenizer.from_file(str(tokenizer_path)), int(cfg["model"]["vocab_size"]))
    cfg["input"] = with_strings(resolve_input_references(cfg["input"]), strings)
    spec = JobSpec.from_cfg(cfg)
    model = build_decoder(spec.model, seed=seed)
    g = torch.Generator().manual_seed(2000 + seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:  # RMSNorm weights
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
    return save_checkpoint(root / f"{input_name}-ckpt", model, spec.checkpoint_config(), tokenizer_path)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{variant: (checkpoint dir, Exported)}, each exported once (export_checkpoint verifies too)."""
    root = tmp_path_factory.mktemp("continuum-exports")
    out = {}
    for name in VARIANTS:
        ckpt = randomised_checkpoint(name, root)
        # the folder name a Python identifier: transformers imports the folder's modeling file under it
        out[name] = (ckpt, export_checkpoint(ckpt, root / name))
    return out


def test_the_test_model_is_wide_enough_for_the_spelling_code(exported):
    ours = load_checkpoint(exported["spelling"][0]).model
    assert ours.input.code_width == 48 + (ours.config.vocab_size - 1).bit_length() <= ours.config.d_model


@pytest.mark.parametrize("name", VARIANTS)
def test_continuum_input_loads_with_auto_classes_and_computes_the_workbench_logits(exported, name):
    ckpt_dir, done = exported[name]
    ours = load_checkpoint(ckpt_dir).model.eval()
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True).eval()
    assert type(theirs).__name__ == "FixedCodeLlamaForCausalLM"
    V, d = ours.config.vocab_size, ours.config.d_model
    ids = random_ids(V)
    with torch.no_grad():
        a, b = ours(ids), theirs(ids).logits
        all_ids = torch.arange(V)[None]
        inputs_equal = torch.equal(ours.input(all_ids), theirs.model.embed_tokens(all_ids))
    assert a.shape == b.shape == (3, 40, V)
    assert a.abs().max() > 0.1, "logits too small for the tolerance to mean anything"
    diff = float((a - b).abs().max())
    print(f"{name}: max |logit diff| {diff:.3g}")
    assert diff <= ATOL
    assert inputs_equal  # every ID's input vector, bit for bit
    assert done.max_abs_logit_diff is not None and done.max_abs_logit_diff <= ATOL  # the export's own check ran

    config = json.loads((done.path / "config.json").read_text())
    code = config["input_code"]
    assert (done.path / MODELING_FILE).is_file() and "AutoModelForCausalLM" in config["auto_map"]
    shapes = weight_shapes(done.path)
    assert not [k for k, s in shapes.items() if s == (V, d) and k != "lm_head.weight"], shapes  # no V x d input
    embed = {k.removeprefix("model.embed_tokens."): s for k, s in shapes.items() if k.startswith("model.embed_tokens.")}
    assert embed.pop("weight") == (V, 0)  # the placeholder that stops a plain Llama
    inp = ours.input
    if name == "spelling":  # a fixed table code: the scaled (V, K) values, no map, nothing trainable
        assert code["kind"] == "table" and "map" not in code and embed == {"code_values": (V, inp.code_width)}
        assert not list(theirs.model.embed_tokens.parameters())
        return
    map_kind = code["map"]["kind"]
    assert set(embed) - {"code_values"} == MAP_TENSORS[map_kind]
    trainable = dict(theirs.model.embed_tokens.named_parameters())
    for key in MAP_TENSORS[map_kind]:  # real parameters, loaded with the trained values, trainable in HF
        assert trainable[key].requires_grad, key
        assert torch.equal(trainable[key], inp.get_parameter(key.removeprefix("map.")))
    if name in LOWRANK:
        assert code == {**code, "kind": "table", "code_width": inp.rank, "trainable": True, "map": {"kind": "linear"}}
        assert embed["code_values"] == (V, inp.rank)
        assert trainable["code_values"].requires_grad  # the V x r table trains on in HF, as in the workbench
        assert torch.equal(trainable["code_values"], inp.table.weight)
    else:
        assert code["source"] == "code_map" and code["code_source"] == inp.code.kind
        assert code["code_width"] == inp.code_width
        assert code["kind"] == ("bits" if inp.code.kind == "binary" else "table")
        assert ("code_values" in embed) == (code["kind"] == "table")
        if map_kind == "mlp":
            assert code["map"] == {"kind": "mlp", "hidden": inp.hidden, "activation": inp.activation}
        assert "code_values" not in trainable  # the code itself stays fixed
    # a gradient reaches every map weight through the loaded model's own forward
    theirs.zero_grad()
    theirs(ids, labels=ids).loss.backward()
    for key in MAP_TENSORS[map_kind]:
        assert trainable[key].grad is not None and trainable[key].grad.abs().max() > 0, key


@pytest.mark.parametrize("name", ["binary16_mlp", "spelling_mlp", "learned_lowrank"])
def test_a_bf16_load_computes_the_workbench_bf16_input_bit_for_bit(exported, name):
    """The code in fp32, the map's layers in the weights' dtype: the workbench's order, so a bf16 load
    gives the workbench bf16 model's input vectors exactly."""
    ckpt_dir, done = exported[name]
    ours = load_checkpoint(ckpt_dir).model.to(torch.bfloat16).eval()
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True,
                                                  dtype=torch.bfloat16).eval()
    all_ids = torch.arange(ours.config.vocab_size)[None]
    with torch.no_grad():
        a, b = ours.input(all_ids).to(torch.bfloat16), theirs.model.embed_tokens(all_ids)
    assert b.dtype == torch.bfloat16
    assert torch.equal(a, b)



ROUND_TRIP = ("binary16_linear", "binary16_mlp", "spelling", "spelling_mlp", "learned_lowrank", "learned_lowrank4")


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_the_import_rebuilds_the_workbench_decoder_exactly(exported, name):
    """export -> decoder_from_hf: the same input type and settings, every parameter and buffer bit for
    bit (the map's weights from `model.embed_tokens.map.*`, a low-rank table from `code_values`, a
    fixed code recomputed from the input config), hence the workbench's logits exactly."""
    ckpt_dir, done = exported[name]
    ours = load_checkpoint(ckpt_dir).model.eval()
    back, _, input_cfg = decoder_from_hf(done.path)
    assert type(back.input) is type(ours.input) and input_cfg["type"] == ours.input.kind
    for attr in ("code_width", "map_kind", "hidden", "activation", "rank", "trainable"):
        assert getattr(back.input, attr, None) == getattr(ours.input, attr, None), attr
    if hasattr(ours.input, "code"):  # a code_map: its fixed code, the same type and values
        assert type(back.input.code) is type(ours.input.code)
    a, b = ours.state_dict(), back.state_dict()
    assert set(a) == set(b)
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert {k for k, p in back.named_parameters() if p.requires_grad} == {
        k for k, p in ours.named_parameters() if p.requires_grad}
    ids = random_ids(ours.config.vocab_size)
    with torch.no_grad():
        ref, got = ours(ids), back(ids)
    assert ref.abs().max() > 0.1
    assert torch.equal(ref, got)
    # checkpoint= the export resolves to the checkpoint it came from (hub/source.py maps it back the same way)
    assert checkpoint_folder(done.path, "fix").resolve() == ckpt_dir.resolve()


def _copy_export(folder, to):
    import shutil

    return shutil.copytree(folder, to)


def test_the_import_refuses_a_code_map_whose_code_table_is_not_the_one_its_config_rebuilds(exported, tmp_path):
    """spelling_mlp holds its spelling code as a table: compared with `input.code`'s, never loaded over it."""
    from safetensors.torch import load_file, save_file

    folder = _copy_export(exported["spelling_mlp"][1].path, tmp_path / "tampered")
    weights = folder / "model.safetensors"
    state = load_file(str(weights))
    values = state["model.embed_tokens.code_values"].clone()
    values[3, 0] = 1.0 - values[3, 0]  # one bit of one token
    state["model.embed_tokens.code_values"] = values
    save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(ConfigError, match="code table differs"):
        decoder_from_hf(folder)


@pytest.mark.parametrize(("name", "field", "value"), [("binary16_mlp", "map", {"kind": "mlp", "hidden": 64,
                                                                                 "activation": "relu"}),
                                                       ("binary16_linear", "map", {"kind": "mlp", "hidden": 8}),
                                                       ("learned_lowrank", "code_width", 8)])
def test_the_import_refuses_a_description_its_input_config_does_not_rebuild(exported, tmp_path, name, field, value):
    folder = _copy_export(exported[name][1].path, tmp_path / "tampered")
    config = json.loads((folder / "config.json").read_text())
    config["input_code"][field] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=f"input_code differs .* in {field}"):
        decoder_from_hf(folder)


# What the card's first paragraph says of each input (hub/card.py input_sentence), and its trainable
# input parameters as the test computes them from the shapes: (token-specific, shared).
CARD_SAYS = {
    "binary16_linear": ("a **fixed code of the token ID** (`binary`, K = 16 coordinates)",
                        "a trainable **linear map shared by every token** (K x d_model, no bias"),
    "binary16_mlp": ("a **fixed code of the token ID** (`binary`, K = 16 coordinates)",
                     "a trainable **MLP shared by every token** (K -> 64 -> d_model: a biased hidden layer, gelu"),
    "spelling_mlp": ("a **fixed code of the token's spelling** (`spelling`", "a trainable **MLP shared by every token**"),
    "spelling": ("a **fixed code of the token's spelling** (`spelling`",
                 ("held in the weights as the V x K table `model.embed_tokens.code_values` (no trainable input "
                  "table, no projection)")),
    "learned_lowrank": ("a **learned low-rank table**: a trainable V x 16 table (one row per token: token-specific",
                        "times a trainable 16 x d_model linear map shared by every token"),
    "learned_lowrank4": ("a **learned low-rank table**: a trainable V x 4 table", "4 x d_model linear map"),
}


def expected_split(model) -> tuple[int, int]:
    V, d, inp = model.config.vocab_size, model.config.d_model, model.input
    if inp.kind == "learned_lowrank":
        return V * inp.rank, inp.rank * d
    if inp.kind == "code_map":
        k = inp.code_width
        return 0, (k * d if inp.map_kind == "linear" else k * inp.hidden + inp.hidden + inp.hidden * d)
    if inp.kind == "learned_lowdim":
        return V * inp.code_width, 0
    return 0, 0


def first_paragraph(card: str) -> str:
    return card.split("\n# fixedcode-study: ", 1)[1].split("\n\n")[1]


@pytest.mark.parametrize("name", VARIANTS)
def test_the_exported_card_says_what_the_input_is(exported, name):
    ckpt_dir, done = exported[name]
    card = (done.path / "README.md").read_text()
    about = first_paragraph(card)
    for phrase in CARD_SAYS[name]:
        assert phrase in about, (phrase, about)
    ours = load_checkpoint(ckpt_dir).model
    specific, shared = expected_split(ours)
    assert f"Trainable input parameters: {specific:,} token-specific (one row per token ID) + {shared:,} shared" in about
    mapped = name != "spelling"
    assert ("no projection" in card) == (not mapped)  # a map, or a low-rank table's map, is a projection
    assert ("no trainable input table" in card) == (not mapped)
    if mapped:  # what get_input_embeddings().weight is: input vectors through the map, not a fixed code
        assert "`get_input_embeddings().weight` is the V x d matrix of input vectors" in card
        assert "the fixed V x d code" not in card


@pytest.mark.parametrize("name", ["learned_lowdim", "binary16", "binary16_mlp"])
def test_the_card_reads_the_records_trainable_split(name, tmp_path):
    """With a job record, the split is results.json's params (accounting.input_split), in the paragraph
    and the Parameters section; learned_lowdim's V x K table is said to be one, not a parameter-free code."""
    from types import SimpleNamespace

    from fixedcode_study.accounting import parameter_groups
    from fixedcode_study.hub.card import model_card
    from fixedcode_study.hub.export import input_code_spec

    ckpt = load_checkpoint(randomised_checkpoint(name, tmp_path))
    params = parameter_groups(ckpt.model)
    specific, shared = expected_split(ckpt.model)
    assert (params["input_token_specific_trainable"], params["input_shared_trainable"]) == (specific, shared)
    hf_config = SimpleNamespace(input_code=input_code_spec(ckpt.model.input)[0], output_head=None)
    card = model_card(ckpt, {"params": params, "status": "completed"}, None, hf_config)
    about = first_paragraph(card)
    assert f"Trainable input parameters: {specific:,} token-specific (one row per token ID) + {shared:,} shared" in about
    if name == "learned_lowdim":
        assert "a **learned low-dimensional table**: a V x 16 table trained with the model" in about
        assert "no trainable input table" not in card and "the fixed V x d code" not in card
        assert f"`input_trainable` is {specific:,} for this input ({specific:,} token-specific + 0 shared)." in card
    elif name == "binary16":
        assert "a **fixed code of the token ID** (`binary`, K = 16 coordinates) tiled to d_model, computed on the fly" in about
        assert "(no trainable input table, no projection)" in about
        assert "`input_trainable` is 0 for a fixed code." in card
    else:
        assert "no projection" not in card and "for a fixed code" not in card
        assert f"`input_trainable` is {shared:,} for this input (0 token-specific + {shared:,} shared)." in card
