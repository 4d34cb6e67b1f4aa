"""The ablation space's input variants: injectivity, scale matching, controls, size matching, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fixedcode_study.accounting import body_params, parameter_groups
from fixedcode_study.build import build_model, resolve_input_references, trainable_params
from fixedcode_study.config import available, load_option
from fixedcode_study.config import compose as compose_config
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.description import describe as describe_spec
from fixedcode_study.errors import ConfigError
from fixedcode_study.inputs import FixedCode, build_input, input_trainable_params, input_trainable_split, minimal_code_width
from fixedcode_study.spec.vocabulary import needs_vocabulary
from fixedcode_study.inputs.gf2 import gf2_rank, matrix_sha256, sample_constrained
from fixedcode_study.model import ModelConfig
from fixedcode_study.record.checkpoint import load_checkpoint, save_checkpoint
from helpers.vocabulary import with_vocabulary


def describe(cfg):
    """The describe dict of a composed config, resolved as `fixedcode describe` resolves it."""
    return describe_spec(JobSpec.from_cfg(cfg))


V, D = 4096, 128  # cpu_tiny's vocabulary and width


def load_input_config(name: str) -> dict:
    """conf/input/<name>.yaml with any variant it names resolved, as build_model resolves it."""
    return resolve_input_references(load_option("input", name, field="input"))


def embed_all(layer, vocab_size: int) -> torch.Tensor:
    """The input vectors of every token ID, through the module's own forward: (V, d)."""
    with torch.no_grad():
        return layer(torch.arange(vocab_size).view(1, -1))[0]


def distinct_rows(x: torch.Tensor) -> int:
    return len(torch.unique(x, dim=0))


FIXED_CONFIGS = {
    "binary_minimal": dict(type="binary", code_width=None),
    "binary16_pm1_match": dict(type="binary", code_width=16, values="pm1", scale="match_init"),
    "binary16_01_match": dict(type="binary", code_width=16, values="01", scale="match_init"),
    "binary16_small_scale": dict(type="binary", code_width=16, scale=1e-3),
    "gf2_affine": dict(type="gf2", code_width=16, affine=True, matrix_seed=7),
    "gf2_weight8_walk": dict(type="gf2", code_width=16, min_weight=8),
    "wide24": dict(type="wide", code_width=24),
    "wide64_pm1": dict(type="wide", code_width=64, values="pm1", scale="match_init"),
    "wide32_random": dict(type="wide", code_width=32, extra="random", code_seed=3),
    "random_fixed": dict(type="random_fixed", code_width=64),
    "random_fixed_full_match": dict(type="random_fixed", code_width=None, scale="match_init"),
}


@pytest.mark.parametrize("name", sorted(FIXED_CONFIGS))
@pytest.mark.parametrize("vocab_size,d_model", [(V, D), (509, 64)])  # a non-power-of-two vocabulary too
def test_fixed_codes_injective_after_tiling_and_scaling(name, vocab_size, d_model):
    layer = build_input(FIXED_CONFIGS[name], vocab_size, d_model, init_std=0.02)
    assert sum(p.numel() for p in layer.parameters()) == 0  # no parameters at all
    out = embed_all(layer, vocab_size)
    assert out.shape == (vocab_size, d_model)
    assert distinct_rows(out) == vocab_size  # the module's real output, tiled and scaled
    props = layer.properties()
    assert props["injective"] is True
    assert props["code_width"] <= d_model
    assert props["tile_factor"] == pytest.approx(d_model / props["code_width"])
    if props["scale_mode"] == "match_init":
        assert out.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=1e-4)
    assert props["input_rms"] == pytest.approx(out.double().pow(2).mean().sqrt().item(), rel=1e-4)


def test_scale_that_underflows_is_caught_as_not_injective():
    # 1e-46 is below float32's smallest subnormal: every scaled bit becomes 0 -> all IDs collide.
    with pytest.raises(ConfigError, match="maps two token IDs to the same vector"):
        build_input(dict(type="binary", code_width=16, scale=1e-46), V, D)
    with pytest.raises(ConfigError, match="maps two token IDs"):
        build_input(dict(type="random_fixed", code_width=8, scale=1e-46), V, D)


def test_binary_minimal_width_and_binary16_unchanged():
    for vocab in (2, 3, 512, 4096, 4097, 49152, 65536):
        layer = build_input(load_input_config("binary"), vocab, 64)
        assert layer.code_width == minimal_code_width(vocab) == int(np.ceil(np.log2(vocab)))
    b16 = build_input(load_input_config("binary16"), V, D)
    ids = torch.tensor([0, 1, 5, 4095])
    expected = ((ids[:, None] >> torch.arange(16)) & 1).float().repeat(1, D // 16)
    assert torch.equal(b16(ids.view(1, -1))[0], expected)


def test_gf2_paper_matrix_is_unchanged_and_high_weights_are_reachable():
    # The paper's matrix (seed 12345, min_weight 4, K=16) is still the rejection sampler's draw.
    drawn = sample_constrained(16, 12345, 4, False)
    assert (drawn.method, drawn.draws) == ("rejection", 9)
    assert matrix_sha256(drawn.matrix, drawn.shift)[:16] == "007339ff01c0c10a"
    gf2 = build_input(load_input_config("gf2"), V, D)
    assert gf2.properties()["matrix_sampler"] == "rejection"
    # Weight 8 and K-1 (the largest feasible) come from the constrained walk, deterministically.
    for k, w in [(16, 8), (16, 15), (15, 14), (12, 11)]:
        first, again = sample_constrained(k, 3, w, True), sample_constrained(k, 3, w, True)
        assert first.method == "walk" and gf2_rank(first.matrix) == k
        assert first.matrix.sum(axis=0).min() >= w and first.matrix.sum(axis=1).min() >= w
        assert np.array_equal(first.matrix, again.matrix) and np.array_equal(first.shift, again.shift)
    assert not np.array_equal(sample_constrained(16, 1, 8, False).matrix, sample_constrained(16, 2, 8, False).matrix)


def test_every_rejection_draw_meets_the_row_and_the_column_weight():
    """At K = 16, min_weight 6 a uniform draw passes the rows about as often as it fails a column: a
    sampler that checked only one of them would hand out a matrix below the bound within a few seeds."""
    for seed in range(12):
        drawn = sample_constrained(16, seed, 6, False)
        assert drawn.method == "rejection" and gf2_rank(drawn.matrix) == 16
        assert drawn.matrix.sum(axis=1).min() >= 6 and drawn.matrix.sum(axis=0).min() >= 6, seed


def test_wide_code_is_canonical_prefix_plus_nonconstant_recodings():
    layer = build_input(dict(type="wide", code_width=32, matrix_seed=5), V, D)
    m = minimal_code_width(V)
    bits = layer.code_bits(torch.arange(V)).numpy().astype(np.uint8)  # (V, K)
    assert bits.shape == (V, 32)
    assert np.array_equal(bits[:, :m], (np.arange(V)[:, None] >> np.arange(m)) & 1)  # canonical prefix
    extra = bits[:, m:]
    assert (extra.min(axis=0) == 0).all() and (extra.max(axis=0) == 1).all()  # no constant extra bit
    props = layer.properties()
    assert props["n_recodings"] == 2 and props["extra_bits"] == 32 - m
    # forward puts exactly these bits in the first K coordinates
    assert torch.equal(embed_all(layer, V)[:, :32], torch.from_numpy(bits.astype(np.float32)))
    # different matrix seeds give different codes; the same seed the same code
    other = build_input(dict(type="wide", code_width=32, matrix_seed=6), V, D)
    assert props["code_sha256"] != other.properties()["code_sha256"]
    assert props["code_sha256"] == build_input(dict(type="wide", code_width=32, matrix_seed=5), V, D).properties()["code_sha256"]


def test_random_fixed_is_a_seeded_frozen_buffer():
    a = build_input(dict(type="random_fixed", code_width=16, code_seed=1), V, D)
    b = build_input(dict(type="random_fixed", code_width=16, code_seed=1), V, D)
    c = build_input(dict(type="random_fixed", code_width=16, code_seed=2), V, D)
    assert torch.equal(a.code_table, b.code_table) and not torch.equal(a.code_table, c.code_table)
    assert "code_table" in a.state_dict() and not list(a.parameters())
    assert a.properties()["storage"] == "buffer"
    assert abs(a.code_table.mean().item()) < 0.02 and a.code_table.std().item() == pytest.approx(1.0, abs=0.02)


def test_learned_lowdim_counts_and_trains():
    layer = build_input(dict(type="learned_lowdim", code_width=16), V, D, init_std=0.02)
    assert sum(p.numel() for p in layer.parameters() if p.requires_grad) == V * 16
    out = layer(torch.tensor([[3, 9]]))
    assert torch.equal(out[..., :16], out[..., 16:32])  # tiled
    out.sum().backward()
    assert layer.table.weight.grad is not None and layer.table.weight.grad[3].abs().sum() > 0


def test_frozen_learned_has_no_trainable_input_and_gets_no_gradient():
    torch.manual_seed(0)
    model = build_model(compose_config(["model=test_micro", "input=frozen_learned"]).model,
                        load_input_config("frozen_learned"))
    groups = parameter_groups(model)
    assert groups["input_trainable"] == 0 and groups["input_total"] == 512 * 64
    before = model.input.table.weight.detach().clone()
    assert before.std().item() == pytest.approx(0.02, rel=0.05)
    model(torch.randint(0, 512, (2, 8))).float().pow(2).mean().backward()
    assert model.input.table.weight.grad is None
    assert torch.equal(model.input.table.weight, before)


def test_learned_codestats_and_code_copy_init():
    torch.manual_seed(0)
    stats = build_input(load_input_config("learned_codestats"), V, D)
    code = build_input(load_input_config("binary16"), V, D)
    code_vals = embed_all(code, V)  # (V, d) in {0,1}
    table = stats.table.weight.detach()
    assert stats.properties()["init"] == "code_stats" and stats.properties()["init_code"] == "binary16"
    # per-coordinate mean/std follow the code's (constant bits 12..15 of each tile start at exactly 0)
    assert torch.allclose(table.mean(0), code_vals.mean(0), atol=0.05)
    assert torch.allclose(table.std(0), code_vals.std(0), atol=0.05)
    assert table[:, 12].abs().max() == 0
    copy = build_input(resolve_input_references(dict(type="learned", init="code", init_code="gf2")), V, D)
    assert torch.equal(copy.table.weight.detach(), embed_all(build_input(load_input_config("gf2"), V, D), V))
    assert copy.table.weight.requires_grad


def test_frozen_codestats_is_a_frozen_table_at_the_codes_scale():
    # The probes' scale-vs-interface arm: binary16's per-coordinate statistics (so its RMS, 0.61 at
    # V=4,096), as a real-valued random table that never trains.
    model = build_model(compose_config(["model=test_micro", "input=frozen_codestats"]).model,
                        load_input_config("frozen_codestats"))
    table = model.input.table.weight
    assert not table.requires_grad
    assert not any(p.requires_grad for p in model.input.parameters())
    code = embed_all(build_input(load_input_config("binary16"), table.shape[0], table.shape[1]), table.shape[0])
    rms = lambda x: x.pow(2).mean().sqrt().item()
    assert abs(rms(table.detach()) - rms(code)) < 0.02 * rms(code)


@pytest.mark.parametrize("name", ["binary16", "binary16_scaled", "gf2"])
def test_the_probes_read_a_binary_codes_bits_whatever_its_value_set(name):
    # binary16_scaled is binary16 in {-1,+1} at scale 0.02: the probes' code-bit targets are its bits.
    from fixedcode_study.probing.states import code_bits
    model = build_model(compose_config(["model=test_micro", f"input={name}"]).model, load_input_config(name))
    ids = np.arange(model.input.vocab_size)
    bits = code_bits(model, ids)
    assert bits is not None and set(np.unique(bits)) == {0, 1}
    assert np.array_equal(bits, model.input.all_bits().astype(np.int8))
    if name != "gf2":
        assert np.array_equal(bits, (ids[:, None] >> np.arange(bits.shape[1])) & 1)


def test_the_probes_find_no_code_bits_in_a_table():
    from fixedcode_study.probing.states import code_bits
    model = build_model(compose_config(["model=test_micro", "input=learned"]).model, load_input_config("learned"))
    assert code_bits(model, np.arange(8)) is None


@pytest.mark.parametrize("model", ["test_micro", "cpu_tiny", "cpu_30m", "smollm2_135m", "smollm2_360m", "paper_1p7b"])
def test_size_matched_within_one_percent_and_described(model):
    learned = describe(compose_config([f"model={model}", "input=learned"]))
    for name in ("binary16_sizematched", "gf2_sizematched"):
        d = describe(compose_config([f"model={model}", f"input={name}"]))
        assert d["params"]["input_trainable"] == 0
        assert abs(d["params"]["trainable"] / learned["params"]["trainable"] - 1) <= 0.01
        sm = d["size_match"]
        assert sm["target_trainable (learned input)"] == learned["params"]["trainable"]
        assert sm["unmatched_trainable (this input, preset body)"] < sm["target_trainable (learned input)"]
        assert d["architecture"]["d_ff"] > d["preset_architecture"]["d_ff"]
        assert d["params"]["body"] == body_params(ModelConfig(**d["architecture"]))


def test_size_match_n_layer_and_multiple_of():
    cfg = compose_config(["model=cpu_tiny", "input=binary16_sizematched", "input.size_match_by=n_layer+d_ff"])
    d = describe(cfg)
    assert d["architecture"]["n_layer"] == 6 and abs(d["input_props"]["size_match_rel_error"]) <= 0.01
    cfg = compose_config(["model=paper_1p7b", "input=binary16_sizematched", "input.size_match_multiple_of=64"])
    assert describe(cfg)["architecture"]["d_ff"] % 64 == 0


def test_size_matched_checkpoint_rebuilds_same_architecture(tmp_path):
    from tokenizers import Tokenizer, models

    tok = tmp_path / "tokenizer.json"
    Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")).save(str(tok))  # load_checkpoint parses it
    for name in ("binary16_sizematched", "gf2", "random_fixed", "wide_random", "learned_lowdim", "learned_codestats"):
        cfg = compose_config(["model=test_micro", f"input={name}"])
        torch.manual_seed(0)
        model = build_model(cfg.model, cfg.input)
        ckpt = save_checkpoint(tmp_path / name, model, JobSpec.from_cfg(cfg).checkpoint_config(), tok)
        loaded = load_checkpoint(ckpt)
        assert loaded.model.config == model.config
        ids = torch.randint(0, 512, (2, 16))
        with torch.no_grad():
            assert torch.equal(loaded.model(ids), model.eval()(ids))
        assert loaded.config["input_props"] == model.input.properties()


INVALID = [
    (["input=learned_lowdim", "input.code_width=256"], "model.d_model"),
    (["input=gf2", "input.min_weight=16"], "input.min_weight"),
    (["input=gf2", "input.min_weight=17"], "input.min_weight"),
    (["input=wide", "input.code_width=8"], "input.code_width"),
    (["input=wide", "input.min_weight=0"], "input.min_weight"),
    (["input=wide", "input.extra=hash"], "input.extra"),
    (["input=binary16", "input.scale=huge"], "input.scale"),
    (["input=binary16", "input.scale=0"], "input.scale"),
    (["input=random_fixed", "input.code_width=129"], "model.d_model"),
    (["input=binary16_sizematched", "input.size_match_by=n_layer"], "input.size_match_by"),
    (["input=binary16_sizematched", "input.size_match_multiple_of=1024"], "input.size_match_by"),
    (["input=binary16_sizematched", "input.size_match=gpt2"], "input.size_match"),
    (["input=learned_codestats", "input.init_code=nonexistent"], "input.init_code"),
    (["input=learned_codestats", "input.init_code=learned"], "input.init_code.type"),
    (["input=learned", "+input.init=code"], "input.init_code"),
    (["input=frozen_learned", "+input.matrix_seed=3"], "input.matrix_seed"),
]


@pytest.mark.parametrize("overrides,field", INVALID, ids=[" ".join(o) for o, _ in INVALID])
def test_invalid_combinations_fail_fast_with_one_line(overrides, field):
    cfg = compose_config(["model=cpu_tiny", *overrides])
    with pytest.raises(ConfigError) as err:
        describe(cfg)
    assert err.value.field == field
    message = str(err.value)
    assert "\n" not in message and message.startswith(field + ":") and "; " in message


def test_describe_cli_reports_config_error_as_one_line(capsys):
    from fixedcode_study.cli.describe import main

    assert main(["model=cpu_tiny", "input=learned_lowdim", "input.code_width=256"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: model.d_model:") and "\n" not in err


def _expected_input_trainable(props: dict, vocab: int, d_model: int) -> int:
    if props["type"] == "learned":
        return vocab * d_model if props["trainable"] else 0
    if props["type"] == "learned_lowdim":
        return vocab * props["code_width"]
    return sum(_expected_input_split(props, vocab, d_model).values())


def _expected_input_split(props: dict, vocab: int, d_model: int) -> dict[str, int]:
    """The continuum's inputs (inputs/mapped.py): token-specific and shared trainable parameters by formula."""
    if props["type"] == "learned_lowrank":
        r = props["rank"]
        return {"token_specific": vocab * r, "shared": r * d_model}
    if props["type"] == "code_map":
        k, h = props["code_width"], props["hidden"]
        shared = k * d_model if props["map"] == "linear" else k * h + h + h * d_model
        return {"token_specific": 0, "shared": shared}
    return {"token_specific": 0, "shared": 0}


# the smallest preset in the default suite, every larger one in the slow tier
@pytest.mark.parametrize("model", ["test_micro", *(pytest.param(m, marks=pytest.mark.slow) for m in
                                                  ("cpu_tiny", "cpu_30m", "smollm2_135m", "smollm2_360m", "paper_1p7b"))])
def test_describe_every_input_consistent_accounting(model):
    inputs = available("input")
    assert {"learned", "binary16", "gf2", "binary", "wide", "random_fixed", "learned_lowdim",
            "frozen_learned", "binary16_sizematched"} <= set(inputs)
    # Inputs that spell need the job's tokenizer: described on the presets whose corpus the tests prepare anyway.
    spelled = {n for n in inputs if needs_vocabulary(load_input_config(n))}
    if model not in ("test_micro", "cpu_tiny"):
        inputs = [n for n in inputs if n not in spelled]
    rows = {name: describe(compose_config([f"model={model}", f"input={name}"])) for name in inputs}
    base = rows["learned"]["params"]
    for name, d in rows.items():
        p, props, arch = d["params"], d["input_props"], d["architecture"]
        vocab, d_model = arch["vocab_size"], arch["d_model"]
        assert d["input"] == name and props["vocab_size"] == vocab
        assert p["total"] == p["input_total"] + p["body"] + p["head"], name
        assert p["trainable"] == p["input_trainable"] + p["body"] + p["head"], name  # body and head all train
        assert p["head"] == vocab * d_model
        assert p["input_trainable"] == _expected_input_trainable(props, vocab, d_model), name
        if props["type"] in ("code_map", "learned_lowrank"):
            split = _expected_input_split(props, vocab, d_model)
            assert (p["input_token_specific_trainable"], p["input_shared_trainable"]) == (
                split["token_specific"], split["shared"]), name
        if not props.get("size_match"):
            assert p["body"] == base["body"], name  # only the input differs between variants
        if isinstance(props.get("injective"), bool):
            assert props["injective"] is True, name
        assert json.dumps(props)  # plain JSON values: they go to results.json and W&B as they are
        # flat for analysis: scalars, or a list of scalars (constant_bits; analysis keeps lists as JSON text)
        assert all(not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v))
                   for v in props.values()), name
    assert rows["learned_lowdim"]["params"]["input_trainable"] == base["input_trainable"] // rows["learned"][
        "architecture"]["d_model"] * 16


def test_fixed_code_base_class_covers_every_fixed_type():
    for name in ("binary", "binary16", "gf2", "wide", "wide_random", "random_fixed", "binary16_scaled"):
        assert isinstance(build_input(load_input_config(name), 512, 64), FixedCode), name


@pytest.mark.parametrize("vocab_size,d_model", [(V, D), (512, 64)])
def test_input_trainable_params_matches_the_built_model(vocab_size, d_model):
    """The count size matching uses (from shapes, no module) equals the built model's, for every variant."""
    names = available("input")
    assert {"learned", "frozen_learned", "learned_lowdim", "learned_codestats", "binary16", "gf2"} <= set(names)
    for name in names:
        cfg = with_vocabulary(load_input_config(name), vocab_size)
        with torch.device("meta"):
            model = build_model({"vocab_size": vocab_size, "n_layer": 2, "n_head": 4, "d_model": d_model,
                                 "d_ff": 2 * d_model, "max_seq_len": 32}, cfg)
        groups = parameter_groups(model)
        counted = input_trainable_params(cfg, vocab_size, d_model)
        assert counted == groups["input_trainable"], name
        split = input_trainable_split(cfg, vocab_size, d_model)
        assert (split["token_specific"], split["shared"]) == (
            groups["input_token_specific_trainable"], groups["input_shared_trainable"]), name
        assert trainable_params(model.config, counted) == groups["trainable"], name
    assert input_trainable_params(dict(type="learned_lowdim", code_width=8, trainable=False), V, D) == 0
    with pytest.raises(ConfigError) as err:
        input_trainable_params(dict(type="embedding"), V, D)
    assert err.value.field == "input.type"
