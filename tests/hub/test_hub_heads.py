"""The Hugging Face export of every output head (conf/output; issue #23 point 3), offline.

Each head of conf/output is exported from a test_micro checkpoint (binary16 input; learned for the
tied head, and once with a table-free head on a learned input) whose every parameter is drawn away
from its init (helpers.eval.untrained_checkpoint(randomised=True): a zero bias or a unit norm mapped
to the wrong place would otherwise go unnoticed), loaded with transformers' own AutoModelForCausalLM,
and compared with the workbench model's forward. References are the workbench model and its head's
own buffers, never the code under test.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from helpers.eval import untrained_checkpoint, weight_shapes  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaForCausalLM  # noqa: E402

from fixedcode_study.config import available  # noqa: E402
from fixedcode_study.errors import ConfigError  # noqa: E402
from fixedcode_study.hub.export import MODELING_FILE, export_checkpoint, verify_export  # noqa: E402
from fixedcode_study.hub.imported import decoder_from_hf  # noqa: E402
from fixedcode_study.hub.source import checkpoint_folder  # noqa: E402
from fixedcode_study.record.checkpoint import load_checkpoint  # noqa: E402
from fixedcode_study.systems.hf import to_hf_llama  # noqa: E402

ATOL = 1e-5
TABLE_FREE = ("fixed", "bitchain")
# (input, output): every conf/output head on binary16 (tied only exists with a learned table), and a
# table-free head on a learned input, the one model that needs remote code for its head alone.
CASES = [("learned" if out == "tied" else "binary16", out) for out in available("output")] + [("learned", "bitchain")]
IDS = [f"{i}+{o}" for i, o in CASES]


def case_id(case) -> str:
    return f"{case[0]}+{case[1]}"


def random_ids(vocab: int, T: int = 40) -> torch.Tensor:
    ids = torch.randint(0, vocab, (3, T), generator=torch.Generator().manual_seed(11))
    ids[0, :3] = torch.tensor([0, vocab - 1, vocab // 2])  # both ends of the vocabulary
    return ids


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{(input, output): (checkpoint dir, Exported)}, each exported once (export_checkpoint verifies too)."""
    root = tmp_path_factory.mktemp("head-exports")
    out = {}
    for inp, head in CASES:
        ckpt = untrained_checkpoint(inp, output_name=head, randomised=True)
        # the folder name a Python identifier: transformers imports the folder's modeling file under it
        out[(inp, head)] = (ckpt, export_checkpoint(ckpt, root / f"{inp}_{head}"))
    return out


def head_type(ckpt_dir) -> str:
    return load_checkpoint(ckpt_dir).model.head.kind


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_head_loads_with_auto_classes_and_computes_the_workbench_logits(exported, case):
    ckpt_dir, done = exported[case]
    ours = load_checkpoint(ckpt_dir).model
    kind = ours.head.kind
    remote = case[0] != "learned" or kind in TABLE_FREE
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=remote).eval()
    ids = random_ids(ours.config.vocab_size)
    with torch.no_grad():
        a, b = ours(ids), theirs(ids).logits
    assert a.shape == b.shape == (3, 40, ours.config.vocab_size)
    assert a.abs().max() > 0.1, "logits too small for the tolerance to mean anything"
    diff = float((a - b).abs().max())
    print(f"{case}: max |logit diff| {diff:.3g}")
    assert diff <= ATOL
    assert done.max_abs_logit_diff is not None and done.max_abs_logit_diff <= ATOL  # the export's own check ran
    assert done.head == kind
    config = json.loads((done.path / "config.json").read_text())
    assert type(theirs).__name__ == ("FixedCodeLlamaForCausalLM" if remote else "LlamaForCausalLM")
    assert ((done.path / MODELING_FILE).is_file() and "AutoModelForCausalLM" in config["auto_map"]) == remote
    if kind in TABLE_FREE:
        assert config["output_head"]["kind"] == kind
        V = ours.config.vocab_size
        # nothing trainable at the output has a dimension of size V, as in the workbench head
        assert all(V not in p.shape for p in theirs.lm_head.parameters())
        assert {n: p.shape for n, p in theirs.lm_head.named_parameters()} == {
            n: p.shape for n, p in ours.head.named_parameters()}
        assert weight_shapes(done.path)["lm_head.weight"] == (V, 0)  # the placeholder a plain Llama stops at
    else:
        assert "output_head" not in config  # a Llama head: config.json names nothing about it


@pytest.mark.parametrize("output_name, code", [
    ("fixed", "binary16_scaled"),      # {-1,+1} values: C = +-1 times the head's scale
    ("fixed", "binary16_permuted"),    # the permutation travels as lm_head.id_permutation
    ("fixed", "wide"),                 # 32 bits: M = [I; A_0; ...] over the 9 canonical bits
    ("fixed", "gaussian16"),           # a table code: C stored, scaled
    ("bitchain", "binary16_permuted"),
    ("bitchain", "wide_random"),       # random extra bits: the (V, K) bits stored as a table
])
def test_every_code_family_of_a_head_exports(output_name, code, tmp_path):
    ckpt_dir = untrained_checkpoint("binary16", output_name=output_name, randomised=True,
                                    overrides=(f"output.code={code}",))
    done = export_checkpoint(ckpt_dir, tmp_path / "export")  # verifies C / the chain tables bit for bit
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True).eval()
    ids = random_ids(ours.config.vocab_size, T=24)
    with torch.no_grad():
        a, b = ours(ids), theirs(ids).logits
    assert a.abs().max() > 0.1
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    assert json.loads((done.path / "config.json").read_text())["output_head"]["code"]["source"] == code


def test_the_tied_head_is_a_plain_tied_llama(exported):
    ckpt_dir, done = exported[("learned", "tied")]
    config = json.loads((done.path / "config.json").read_text())
    assert config["tie_word_embeddings"] is True and "auto_map" not in config
    assert not (done.path / MODELING_FILE).exists()
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path)).eval()  # no remote code
    assert type(theirs) is LlamaForCausalLM
    assert theirs.lm_head.weight is theirs.model.embed_tokens.weight  # one tensor under both names
    ours = load_checkpoint(ckpt_dir).model
    V, d = ours.config.vocab_size, ours.config.d_model
    assert torch.equal(theirs.lm_head.weight.detach(), ours.input.table.weight.detach())
    # one V x d tensor in the weights, not two
    assert [k for k, s in weight_shapes(done.path).items() if s == (V, d)] == ["model.embed_tokens.weight"]


@pytest.mark.parametrize("case", [c for c in CASES if c[1].startswith("fixed")], ids=case_id)
def test_a_fixed_head_computes_the_workbench_code_bit_for_bit(exported, case):
    ckpt_dir, done = exported[case]
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True).eval()
    with torch.no_grad():
        assert torch.equal(theirs.lm_head.code_matrix(), ours.head.code)  # C, scale included
    V, K = ours.head.code.shape
    head_tensors = {k: s for k, s in weight_shapes(done.path).items() if k.startswith("lm_head.")}
    spec = json.loads((done.path / "config.json").read_text())["output_head"]["code"]
    if case[1] == "fixed":  # a bit code: computed from config.json, no V-sized output tensor at all
        assert spec["kind"] == "bits" and head_tensors == {"lm_head.proj": (K, ours.config.d_model),
                                                           "lm_head.weight": (V, 0)}
    else:  # a Gaussian code is its values: stored, already scaled
        assert spec["kind"] == "table" and head_tensors["lm_head.code_values"] == (V, K)


@pytest.mark.parametrize("case", [c for c in CASES if c[1].startswith("bitchain")], ids=case_id)
def test_the_bit_chain_is_the_workbench_chain_and_exactly_normalised(exported, case):
    ckpt_dir, done = exported[case]
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True).eval()
    signs, free, _, _ = theirs.lm_head.chain_tables()
    assert torch.equal(signs, ours.head.signs) and torch.equal(free, ours.head.free)
    ids = random_ids(ours.config.vocab_size, T=16)
    targets = torch.roll(ids, -1, dims=1)
    with torch.no_grad():
        logp = theirs(ids).logits  # already log-probabilities
        # the full evaluation in chunks of 7 positions (a long context's memory bound) changes no number
        theirs.lm_head.CHUNK_ELEMENTS = 7 * ours.config.vocab_size * ours.head.code_width
        torch.testing.assert_close(theirs(ids).logits, logp, atol=1e-6, rtol=0)
        torch.testing.assert_close(torch.logsumexp(logp, dim=-1), torch.zeros(ids.shape), atol=1e-5, rtol=0)
        # the teacher-forced NLL the workbench trains on, one target's path only
        nll = ours(ids, targets)
        torch.testing.assert_close(-logp.gather(-1, targets[..., None])[..., 0], nll, atol=1e-5, rtol=0)
        # transformers' own loss over the labels is the same mean NLL
        loss = theirs(ids, labels=ids).loss
        torch.testing.assert_close(loss, ours(ids[:, :-1], ids[:, 1:]).mean(), atol=1e-5, rtol=0)


def test_the_exported_bit_chain_generates_the_workbench_greedy_continuation(exported):
    ckpt_dir, done = exported[("binary16", "bitchain_gf2")]
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(done.path), trust_remote_code=True).eval()
    prompt = torch.tensor([[0, 17, 42, 99]])
    with torch.no_grad():
        out = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)  # KV cache, the last position's head only
        ids = prompt.clone()
        for _ in range(8):  # the reference: the workbench model, full forward per token
            ids = torch.cat([ids, ours(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert out.tolist() == ids.tolist()


def test_a_table_free_head_on_a_learned_input_is_refused_without_remote_code(exported):
    _, done = exported[("learned", "bitchain")]
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):  # the (V, 0) lm_head.weight placeholder
        AutoModelForCausalLM.from_pretrained(str(done.path))


@pytest.mark.parametrize("case, key, wrong", [
    (("binary16", "fixed"), "scale", 0.5),              # C scaled by another number
    (("binary16", "bitchain_gf2"), "matrix", None),     # the chain over the plain bits, not the GF(2) recoding
])
def test_verify_export_catches_a_head_that_computes_something_else(exported, case, key, wrong, tmp_path):
    import shutil

    ckpt_dir, done = exported[case]
    folder = tmp_path / "tampered"
    shutil.copytree(done.path, folder)
    config = json.loads((folder / "config.json").read_text())
    config["output_head"]["code"][key] = wrong
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match="differs from the workbench"):
        verify_export(folder, load_checkpoint(ckpt_dir).model, trust_remote_code=True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_import_maps_every_head_back_bit_for_bit_and_commands_find_the_source(exported, case):
    ckpt_dir, done = exported[case]
    ours = load_checkpoint(ckpt_dir).model
    back, _, _ = decoder_from_hf(done.path)
    assert back.head.kind == ours.head.kind
    a, b = ours.state_dict(), back.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    # checkpoint= an export resolves to the checkpoint it came from (hub/source.py, the same model)
    assert checkpoint_folder(done.path, "fix").resolve() == ckpt_dir.resolve()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_model_card_says_which_head(exported, case):
    _, done = exported[case]
    card = (done.path / "README.md").read_text()
    if case[1] == "untied":
        assert "untied projection" in card and "## Output head" not in card
    else:
        assert f"`{case[1]}` head" in card and "## Output head" in card
    assert ("table-free on the output side" in card) == (case[1] in ("fixed", "fixed_gaussian", "bitchain",
                                                                       "bitchain_gf2"))
    assert ("held in the weights as `lm_head.code_values`" in card) == (case[1] == "fixed_gaussian")  # a Gaussian C
    remote = case[0] != "learned" or case[1] not in ("untied", "tied")
    assert ("trust_remote_code=True)" in card) == remote


def test_the_plain_llama_reference_refuses_a_table_free_head_in_one_line(exported):
    ckpt_dir, _ = exported[("binary16", "bitchain")]
    with pytest.raises(ConfigError) as err:
        to_hf_llama(load_checkpoint(ckpt_dir).model)
    assert err.value.field == "output" and "\n" not in str(err.value)
