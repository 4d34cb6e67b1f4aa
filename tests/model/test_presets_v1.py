"""The earlier version as a preset (experiment=paper_v1, model.mlp=gelu) and the one-GPU-day recipe
(experiment=gpu_quick): the GELU MLP's accounting against the built modules, both experiments'
`describe` against hand computations, paper_v1's affine GF(2) code at V = 65,536, a GELU job
trained end to end, and the one-line refusals of the code that assumes a gated MLP."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from fixedcode_study import accounting
from fixedcode_study.build import build_decoder, build_model, resolve_model
from fixedcode_study.cli import describe as describe_command
from fixedcode_study.cli import sweep as sweep_command
from fixedcode_study.config import available
from fixedcode_study.config import compose as compose_config
from fixedcode_study.errors import ConfigError
from fixedcode_study.inputs import build_input
from fixedcode_study.model import Decoder, GELUMLP, ModelConfig, SwiGLU
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.description import describe as describe_spec
from fixedcode_study.studies import study as studies


def described(overrides: list[str]) -> dict:
    return describe_spec(JobSpec.from_cfg(compose_config(overrides)))


def cli_describe(overrides: list[str], capsys) -> dict:
    """What `fixedcode describe <overrides>` prints, parsed."""
    assert describe_command.main(overrides) == 0
    return json.loads(capsys.readouterr().out)


# -- the GELU MLP -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mlp, matrices", [("swiglu", 3), ("gelu", 2)])
def test_counted_parameters_equal_the_modules(mlp, matrices):
    """accounting's shape-only counts (used by size matching, describe and the FLOPs) equal the
    built modules' numel, for each MLP."""
    cfg = ModelConfig(vocab_size=512, n_layer=3, n_head=4, n_kv_head=2, d_model=64, d_ff=96, max_seq_len=32, mlp=mlp)
    model = build_model({**cfg.to_dict(), "name": "t"}, {"type": "binary", "code_width": 16}, seed=0)
    block = model.blocks[0]
    assert isinstance(block.mlp, {"swiglu": SwiGLU, "gelu": GELUMLP}[mlp])
    assert sum(p.numel() for p in block.mlp.parameters()) == matrices * 64 * 96  # no biases
    assert accounting.block_params(cfg) == sum(p.numel() for p in block.parameters())
    assert accounting.body_params(cfg) == accounting.parameter_groups(model)["body"]
    matmul = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and not name.startswith("input."))
    assert accounting.matmul_params(cfg) == matmul  # N of 6N: every block projection and the head
    assert accounting.flops_per_token(cfg, 32)["dense_6N"] == 6 * matmul


def test_gelu_mlp_computes_down_gelu_up():
    cfg = ModelConfig(vocab_size=64, n_layer=1, n_head=2, d_model=16, d_ff=24, max_seq_len=8, mlp="gelu")
    mlp = GELUMLP(cfg)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))  # (B, T, d)
    expected = x @ mlp.up.weight.T  # (B, T, d_ff)
    expected = 0.5 * expected * (1 + torch.erf(expected / math.sqrt(2)))  # exact GELU
    assert torch.allclose(mlp(x), expected @ mlp.down.weight.T, atol=1e-6)


def test_unknown_mlp_is_a_one_line_config_error():
    with pytest.raises(ConfigError) as err:
        JobSpec.from_cfg(compose_config(["model=test_micro", "+model.mlp=relu"]))
    assert err.value.field == "model.mlp" and "swiglu" in str(err.value) and "gelu" in str(err.value)
    assert "\n" not in str(err.value)


def test_existing_presets_keep_their_resolved_config_and_fingerprint_settings():
    """Only paper_v1 sets model.mlp: every other preset resolves (and hashes) exactly as before the
    option existed, so no earlier job's fingerprint moved; the built model is SwiGLU."""
    for name in available("model"):
        spec = JobSpec.from_cfg(compose_config([f"model={name}"]))
        has_key = any(k.startswith("model.mlp") for k in spec.fingerprint["settings"])
        assert has_key == (name == "paper_v1"), name
        assert spec.model.config.mlp == ("gelu" if name == "paper_v1" else "swiglu")


def test_size_matching_widens_a_gelu_mlp_by_two_matrices_per_unit():
    """paper_v1's fixed code saves V d = 65,536 x 1,024 parameters; each unit of d_ff adds 2 d per
    layer to a GELU MLP (3 d to SwiGLU), so d_ff grows by 65,536 x 1,024 / (2 x 1,024 x 32) = 1,024."""
    spec = resolve_model(compose_config(["model=paper_v1"]).model, {"type": "binary", "code_width": 16,
                                                                     "size_match": "learned"})
    assert spec.config.d_ff == 4096 + 65536 * 1024 // (2 * 1024 * 32) == 5120
    assert spec.size_record["size_match_rel_error"] == 0.0


# -- experiment=paper_v1 ------------------------------------------------------------------------------
def paper_v1_counts() -> dict[str, int]:
    """By hand: 32 blocks of attention 4 d^2 (16 heads of 64, multi-head), a GELU MLP 2 d d_ff and two
    norm scales, plus the final norm; V d for the table and for the untied head."""
    L, d, d_ff, V = 32, 1024, 4096, 65536
    body = L * (4 * d * d + 2 * d * d_ff + 2 * d) + d
    return {"body": body, "table": V * d, "learned": body + 2 * V * d, "fixed": body + V * d}


def test_paper_v1_describe_prints_its_accounting(capsys):
    counts = paper_v1_counts()
    assert counts["learned"] == 536_937_472 and counts["fixed"] == 469_828_608  # conf/model/paper_v1.yaml's comment
    learned = cli_describe(["experiment=paper_v1", "input=learned"], capsys)
    expected = {"mlp": "gelu", "vocab_size": 65536, "n_layer": 32, "d_model": 1024, "d_ff": 4096, "n_head": 16}
    assert {k: learned["architecture"][k] for k in expected} == expected
    assert learned["params"]["body"] == counts["body"]
    assert learned["params"]["input_trainable"] == learned["params"]["head"] == counts["table"]
    assert learned["params"]["trainable"] == counts["learned"]
    gf2 = cli_describe(["experiment=paper_v1", "input=gf2", "input.affine=true"], capsys)
    assert gf2["params"]["trainable"] == counts["fixed"] and gf2["params"]["input_trainable"] == 0
    recipe = gf2["recipe"]
    steps = math.ceil(20 * counts["learned"] / 2**19)  # 20 tokens per learned parameter, 2^19 per step
    assert recipe["tokens_budget"] == 20 * counts["learned"] and recipe["steps"] == steps == 20_483
    assert recipe["tokens_trained"] == steps * 2**19 and recipe["seq_len"] == 2048
    assert (recipe["world_size"], recipe["micro_batch_per_device"], recipe["grad_accum"]) == (8, 8, 4)
    N = 32 * (4 * 1024 * 1024 + 2 * 1024 * 4096) + 65536 * 1024  # matmul weights: blocks + head
    assert recipe["flops_params_N"] == N
    assert recipe["flops_per_token"]["total"] == 6 * N + 12 * 32 * 16 * 64 * 2048


def paper_v1_jobs() -> list:
    return sweep_command.plan(studies.load_study("paper_v1"))


def test_paper_v1_study_is_learned_binary16_and_affine_gf2_times_three_seeds():
    jobs = paper_v1_jobs()
    arms = sorted((j.spec.input_name, bool(j.spec.model.input.get("affine", False)), j.spec.seed) for j in jobs)
    assert arms == sorted((name, name == "gf2", s) for name in ("learned", "binary16", "gf2") for s in (1, 2, 3))
    assert {j.spec.model_name for j in jobs} == {"paper_v1"} and {j.spec.model.preset.mlp for j in jobs} == {"gelu"}


def test_paper_v1_gf2_code_is_affine_full_rank_and_uses_every_16_bit_word():
    """At V = 2^16 the affine map A c xor b is a bijection of {0,1}^16: every code word is a token.
    describe (meta device) reports what the job's record carries (input.properties() of the real
    build), and both agree with a brute-force check of the code."""
    gf2 = next(j for j in paper_v1_jobs() if j.spec.input_name == "gf2" and j.spec.seed == 1)
    spec = JobSpec.from_cfg(compose_config(gf2.overrides))  # the job's config, as its run composes it
    props = describe_spec(spec)["input_props"]
    mcfg = spec.model.config
    inp = build_input(spec.model.input, mcfg.vocab_size, mcfg.d_model, mcfg.init_std)  # as training builds it
    assert inp.properties() == props
    assert props["affine"] is True and props["matrix_seed"] == 12345
    assert props["gf2_rank"] == 16 and props["injective"] is True
    assert props["min_row_weight"] >= 4 and props["min_col_weight"] >= 4  # min_weight 4 (conf/input/gf2.yaml)
    assert props["nonconstant_bits"] == 16 and props["constant_bits"] == []
    bits = inp.scaled_code(inp.all_ids()).numpy()  # (V, 16), values {0, 1} at scale 1
    words = (bits.astype(np.int64) << np.arange(16)).sum(axis=1)
    assert np.array_equal(np.sort(words), np.arange(65536))  # a permutation of all 2^16 words
    assert props["bit_entropy_min"] == 1.0  # every bit is one for exactly half the tokens
    assert props["hamming_min"] == 1 and props["hamming_mean"] == pytest.approx(8 * 65536 / 65535, rel=1e-12)
    shift = inp.gf2_shift.numpy()
    assert shift.any() and np.array_equal(bits[0], shift)  # token 0 (c = 0) maps to b: the affine part


# -- experiment=gpu_quick ---------------------------------------------------------------------------
def test_gpu_quick_describe_prints_its_accounting(capsys):
    L, d, H, Hkv, D, d_ff, V = 30, 576, 9, 3, 64, 1536, 49152  # SmolLM2-135M
    block_matmul = d * (H + 2 * Hkv) * D + H * D * d + 3 * d * d_ff
    body = L * (block_matmul + 2 * d) + d
    assert body == 106_203_456  # Hugging Face's non-embedding count of SmolLM2-135M
    learned_trainable = body + 2 * V * d
    out = cli_describe(["experiment=gpu_quick"], capsys)
    assert out["model"] == "smollm2_135m" and out["input"] == "learned"
    assert out["params"]["trainable"] == learned_trainable == 162_826_560
    recipe = out["recipe"]
    assert recipe["tokens_budget"] == 20 * learned_trainable == 3_256_531_200  # 20 tokens per parameter
    assert recipe["steps"] == math.ceil(20 * learned_trainable / 2**19) == 6212
    assert (recipe["world_size"], recipe["micro_batch_per_device"], recipe["grad_accum"]) == (1, 16, 16)
    per_token = 6 * (L * block_matmul + V * d) + 12 * L * H * D * 2048
    assert recipe["flops_per_token"]["total"] == per_token
    assert recipe["flops_total"] == per_token * 6212 * 2**19
    fixed = cli_describe(["experiment=gpu_quick", "input=binary16"], capsys)
    assert fixed["params"]["trainable"] == body + V * d == 134_515_008


def test_gpu_quick_is_one_gpu_bf16_smollm2_on_fineweb_edu():
    cfg = compose_config(["experiment=gpu_quick"])
    assert (cfg.trainer.accelerator, cfg.trainer.devices, cfg.trainer.precision) == ("gpu", 1, "bf16-mixed")
    assert cfg.data.source == "hf" and cfg.data.tokenizer == "HuggingFaceTB/SmolLM2-135M"
    assert (cfg.data.dataset.path, cfg.data.dataset.name) == ("HuggingFaceFW/fineweb-edu", "sample-10BT")
    jobs = sweep_command.plan(studies.load_study("gpu_quick"))
    assert sorted((j.spec.input_name, j.spec.seed) for j in jobs) == sorted(
        (i, s) for i in ("learned", "binary16", "gf2") for s in (1, 2, 3))


def test_gpu_quick_dry_run_prints_its_gpu_hours(capsys):
    sweep_command.main(["gpu_quick", "dry_run=true"])
    out = capsys.readouterr().out
    total = 9 * 1_231_552_512 * 6212 * 2**19  # 9 jobs x FLOPs per token x tokens trained
    hours = total / (989e12 * 0.40) / 3600
    assert f"{hours:.3g} GPU-hours" in out and 24 < hours < 26  # about one GPU-day
    assert f"~{hours:.0f} H100-hours" in studies.load_study("gpu_quick").cost  # the file's cost line says so


# -- a GELU job end to end, and what refuses it ---------------------------------------------------------
TINY = ["model=test_micro", "+model.mlp=gelu", "input=binary16", "logger=csv", "train.tokens=4096",
        "train.batch_size=4", "train.val_points=1", "train.log_every=4", "train.val_batch_size=8", "train.compile=false"]


def test_a_gelu_job_trains_and_records_its_mlp(tmp_path):
    from fixedcode_study.record.checkpoint import load_checkpoint
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    record = run_job(JobSpec.from_cfg(compose_config(TINY)), tmp_path / "job", TINY).record
    assert record["status"] == "completed" and record["steps"] == 16
    assert record["config"]["model"]["mlp"] == "gelu"
    assert record["fingerprint"]["settings"]["model.mlp"] == "gelu"
    assert np.isfinite(record["final"]["val_loss"])
    body = 2 * (4 * 64 * 64 + 2 * 64 * 128 + 2 * 64) + 64  # test_micro with a GELU MLP
    assert record["params"]["body"] == body
    ckpt = load_checkpoint(tmp_path / "job" / record["checkpoint"])
    assert isinstance(ckpt.model.blocks[0].mlp, GELUMLP)


def gelu_decoder() -> Decoder:
    with torch.device("meta"):
        return build_decoder(JobSpec.from_cfg(compose_config(TINY)).model, seed=0)


def test_hugging_face_conversion_refuses_gelu_in_one_line():
    from fixedcode_study.hub.export import hf_model

    with pytest.raises(ConfigError) as err:
        hf_model(gelu_decoder())
    assert err.value.field == "model.mlp" and "gated" in str(err.value) and "\n" not in str(err.value)


def test_bench_reference_refuses_gelu_in_one_line():
    from fixedcode_study.systems.bench import BenchOptions, preflight

    spec = JobSpec.from_cfg(compose_config(TINY))
    with pytest.raises(ConfigError) as err:
        preflight({"binary16": spec}, BenchOptions(device="cpu"), JobSpec.from_cfg(compose_config([*TINY, "input=learned"])))
    assert err.value.field == "model.mlp" and "reference=false" in str(err.value) and "\n" not in str(err.value)
    preflight({"binary16": spec}, BenchOptions(device="cpu", reference=False), None)  # without the reference: fine
