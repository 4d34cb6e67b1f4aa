"""The one-factor controls: each changes one thing about binary16 (or about the size-matched body)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fixedcode_study.accounting import flops_per_token
from fixedcode_study.build import build_model, flop_matched_tokens, resolve_input_references
from fixedcode_study.config import CONFIG_DIR, load_option
from fixedcode_study.config import compose as compose_config
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.description import describe as describe_spec
from fixedcode_study.errors import ConfigError
from fixedcode_study.inputs import build_input
from fixedcode_study.model import ModelConfig


def describe(cfg):
    """The describe dict of a composed config, resolved as `fixedcode describe` resolves it."""
    return describe_spec(JobSpec.from_cfg(cfg))


V, D = 4096, 128  # cpu_tiny
CONTROLS = ["binary16_permuted", "gaussian16", "binary16_sizematched_isoflop", "gf2_sizematched_isoflop"]


def code(name: str, vocab_size: int = V, d_model: int = D, **overrides):
    cfg = {**load_option("input", name, field="input"), **overrides}
    return build_input(resolve_input_references(cfg), vocab_size, d_model)


def every_id(layer, vocab_size: int = V) -> torch.Tensor:
    with torch.no_grad():
        return layer(torch.arange(vocab_size)[None])[0]  # (V, d)


@pytest.mark.parametrize("name", CONTROLS)
def test_each_control_says_what_it_isolates_in_its_first_line(name):
    first = (Path(CONFIG_DIR) / "input" / f"{name}.yaml").read_text().splitlines()[0]
    assert first.startswith("# Isolates "), first


def test_permuted_binary16_has_the_same_codewords_assigned_differently():
    b16, perm = code("binary16"), code("binary16_permuted")
    a, b = every_id(b16), every_id(perm)  # (V, d)
    assert not torch.equal(a, b)
    # the same set of input vectors: row i of the permuted code is row pi(i) of binary16
    pi = perm.id_permutation
    assert sorted(pi.tolist()) == list(range(V)) and torch.equal(b, a[pi])
    same = ("constant_bits", "nonconstant_bits", "bit_entropy_mean", "hamming_mean", "hamming_min", "code_rms")
    pa, pb = b16.properties(), perm.properties()
    assert {k: pa[k] for k in same} == {k: pb[k] for k in same}
    assert pb["injective"] is True and pb["permutation_seed"] == 0 and pa["permutation_seed"] is None
    assert not torch.equal(code("binary16_permuted", permutation_seed=1).id_permutation, pi)


def test_permuted_code_travels_with_the_checkpoint_state():
    cfg = compose_config(["model=test_micro", "input=binary16_permuted"])
    model = build_model(cfg.model, cfg.input, seed=1)
    assert "input.id_permutation" in model.state_dict()
    assert sum(p.numel() for p in model.input.parameters()) == 0


@pytest.mark.parametrize("vocab_size", [V, 49_152])
def test_gaussian16_has_binary16s_width_and_rms_but_gaussian_values(vocab_size):
    gauss, b16 = code("gaussian16", vocab_size, 64), code("binary16", vocab_size, 64)
    out = every_id(gauss, vocab_size).double()
    target = every_id(b16, vocab_size).double().pow(2).mean().sqrt().item()  # binary16's RMS at this V
    assert out.pow(2).mean().sqrt().item() == pytest.approx(target, rel=1e-5)
    props = gauss.properties()
    assert props["code_width"] == 16 and props["values"] == "gaussian" and props["rms_reference"] == "binary16"
    assert props["injective"] is True and len(out.unique()) > 1000  # continuous values, not two levels


def test_rms_reference_needs_match_init_and_a_fixed_code():
    with pytest.raises(ConfigError) as err:
        code("gaussian16", scale=1.0)
    assert err.value.field == "input.rms_reference"
    with pytest.raises(ConfigError) as err:
        build_input(resolve_input_references({"type": "learned", "rms_reference": "binary16"}), V, D)
    assert err.value.field == "input.rms_reference"


def test_fixed_codes_already_cost_learneds_flops_per_token():
    """The formula counts no FLOPs for an input lookup, so binary16 on the preset's body *is* the
    FLOP-matched counterpart of learned; only the size-matched body costs more."""
    def flops(name: str) -> int:
        cfg = compose_config(["model=cpu_tiny", f"input={name}"])
        with torch.device("meta"):
            return flops_per_token(build_model(cfg.model, cfg.input).config, 128)["total"]
    assert flops("binary16") == flops("gf2") == flops("learned")
    assert flops("binary16_sizematched") / flops("learned") > 1.2
    assert flop_matched_tokens(compose_config(["input=binary16"]).model,
                               {**load_option("input", "binary16", field="input"), "flop_match": "learned"},
                               524_288, 128) == 524_288


@pytest.mark.parametrize("name", ["binary16_sizematched_isoflop", "gf2_sizematched_isoflop"])
def test_isoflop_control_trains_the_size_matched_model_on_learneds_training_flops(name):
    cfg = compose_config(["model=cpu_tiny", f"input={name}"])
    seq_len, budget = int(cfg.train.seq_len), int(cfg.train.tokens)
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.input)
    sized = compose_config(["model=cpu_tiny", f"input={name.removesuffix('_isoflop')}"])
    with torch.device("meta"):
        assert model.config == build_model(sized.model, sized.input).config  # the same model as its size-matched twin
    own = flops_per_token(model.config, seq_len)["total"]
    learned = flops_per_token(ModelConfig.from_mapping(cfg.model), seq_len)["total"]
    tokens = flop_matched_tokens(cfg.model, cfg.input, budget, seq_len)
    assert tokens < budget and abs(tokens * own - budget * learned) <= own  # equal within one token's FLOPs
    d = describe(cfg)
    assert d["input_props"]["flop_match"] == "learned" and d["flop_match"]["tokens_flop_matched"] == tokens
    assert d["flop_match"]["training_flops_ratio_vs_learned"] == pytest.approx(1.0, abs=1e-5)


def test_training_plan_applies_the_flop_matched_budget():
    """The plan (spec/plan.py) trains the isoflop arm on the reduced budget, within one step."""
    learned = JobSpec.from_cfg(compose_config(["model=cpu_tiny", "input=learned"])).plan
    cfg = compose_config(["model=cpu_tiny", "input=binary16_sizematched_isoflop"])
    plan = JobSpec.from_cfg(cfg).plan
    tokens = flop_matched_tokens(cfg.model, cfg.input, int(cfg.train.tokens), int(cfg.train.seq_len))
    assert plan.max_steps < learned.max_steps
    assert 0 <= plan.max_steps * plan.tokens_per_step - tokens < plan.tokens_per_step


def test_bad_flop_match_fails_at_build():
    cfg = compose_config(["model=test_micro", "input=binary16_sizematched_isoflop", "input.flop_match=gpt2"])
    with pytest.raises(ConfigError) as err:
        build_model(cfg.model, cfg.input)
    assert err.value.field == "input.flop_match"
