"""The output-head axis (outputs package): untied, tied, fixed and the bit chain.

What must hold for the study to compare heads: the bit chain is a proper distribution over exactly
the V valid IDs; the table-free heads have no parameter of size V; a fixed code stays fixed through
the real optimizer; at one seed every head leaves the input and the blocks bitwise alike (CRN);
adding the axis moved no untied job's settings.
"""

from __future__ import annotations


import pytest
import torch

from fixedcode_study.accounting import module_group, parameter_groups
from fixedcode_study.build import build_model
from fixedcode_study.config import available
from fixedcode_study.config import compose as compose_config
from fixedcode_study.errors import ConfigError
from fixedcode_study.heads import BitChainHead, FixedCodeHead, TiedHead, UntiedHead
from fixedcode_study.record.checkpoint import load_checkpoint
from fixedcode_study.spec.job import JobSpec

from helpers.eval import trained_checkpoint

V_ODD = 1000  # not a power of two: the top of the code tree is partly empty
HEADS = available("output")


def build(output: str, input_name: str = "learned", *extra: str, seed: int = 1):
    cfg = compose_config(["model=test_micro", f"input={input_name}", f"output={output}", *extra])
    return build_model(cfg.model, cfg.input, seed=seed, output_cfg=cfg.output)


def test_every_head_in_conf_builds_and_computes_logits_over_v():
    assert {"untied", "tied", "fixed", "fixed_gaussian", "bitchain", "bitchain_gf2"} <= set(HEADS)
    ids = torch.randint(0, 512, (2, 9))
    for name in HEADS:
        model = build(name)
        assert model(ids).shape == (2, 9, 512), name


@pytest.mark.parametrize("code", ["binary16", "gf2"])
def test_bitchain_is_a_distribution_over_exactly_the_valid_ids(code):
    model = build("bitchain", "learned", f"output.code={code}", f"model.vocab_size={V_ODD}")
    head = model.head
    assert isinstance(head, BitChainHead)
    with torch.no_grad():
        for p in head.parameters():  # away from init, so the test is not about a near-uniform chain
            p.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
        h = torch.randn(3, head.d_model, generator=torch.Generator().manual_seed(1))
        logp = head(h)  # (3, V)
        assert logp.shape == (3, V_ODD)
        assert torch.allclose(logp.exp().sum(-1), torch.ones(3, dtype=logp.dtype), atol=1e-5)
        # every one of the 2^16 patterns: the V valid codes carry all the mass, the rest exactly none
        bits = torch.arange(16)
        patterns = (torch.arange(2 ** 16)[:, None] >> bits) & 1  # (65536, 16): row k is the pattern of k
        valid = ((head.signs > 0).to(torch.int64) << bits).sum(-1)  # each valid code's row
        assert len(set(valid.tolist())) == V_ODD
        is_valid = torch.zeros(2 ** 16, dtype=torch.bool)
        is_valid[valid] = True
        for i in range(3):
            all_logp = head.code_log_probs(h[i], patterns)
            assert torch.isinf(all_logp[~is_valid]).all() and (all_logp[~is_valid] < 0).all()
            assert abs(all_logp[is_valid].exp().sum().item() - 1.0) < 1e-5
        # teacher forcing is the full distribution's value at the target
        targets = torch.tensor([0, 999, 517])
        assert torch.allclose(head.nll(h, targets), -logp[torch.arange(3), targets], atol=1e-5)


def test_a_heads_init_comes_from_the_seed_alone_not_from_the_global_generator():
    """The head is drawn from its own seeded stream (CRN): whatever torch's global generator holds."""
    heads = []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        heads.append(build("untied", seed=3).head.weight.detach().clone())
    assert torch.equal(*heads)
    assert not torch.equal(heads[0], build("untied", seed=4).head.weight)


def test_a_match_head_fixed_code_has_mean_squared_row_norm_one():
    for output in ("fixed", "fixed_gaussian"):
        head = build(output).head
        assert isinstance(head, FixedCodeHead) and head.scale_mode == "match_head"
        assert head.code.double().pow(2).sum(-1).mean().item() == pytest.approx(1.0, rel=1e-6), output


def test_gf2_chain_forces_bits_that_vary_but_are_determined_by_earlier_ones():
    """At V = 512 the canonical code's bits 9-15 are constant, and the binary16 chain forces them.
    The gf2 image of 0..511 is a 9-dim subspace: none of its bits is constant, yet after 9 free steps
    (a linear code's pattern is the same for every ID) the other 7 follow from the first 9."""
    plain, recoded = build("bitchain").head, build("bitchain_gf2").head
    assert plain.properties()["forced_bits"] == list(range(9, 16))
    assert plain.properties()["code_statistics"]["constant_bits"] == list(range(9, 16))
    assert recoded.properties()["code_statistics"]["constant_bits"] == []
    assert len(recoded.properties()["forced_bits"]) == 7
    assert plain.free.sum(1).eq(9).all() and recoded.free.sum(1).eq(9).all()  # log2(512) choices per token


@pytest.mark.parametrize("name", ["fixed", "fixed_gaussian", "bitchain", "bitchain_gf2"])
def test_table_free_heads_have_no_parameter_of_size_v(name):
    for input_name in ("binary16", "learned"):
        model = build(name, input_name)
        V = model.config.vocab_size
        head_params = {k: p for k, p in model.named_parameters() if module_group(k) == "head"}
        assert head_params and all(V not in p.shape for p in head_params.values()), name
        groups = parameter_groups(model)
        assert groups["token_specific_trainable"] == (0 if input_name == "binary16" else V * model.config.d_model)


def test_parameter_and_flop_counts_from_shapes_match_the_built_heads():
    from fixedcode_study.heads import output_trainable_params
    from fixedcode_study.config import resolve_output_references

    for name in HEADS:
        cfg = compose_config(["model=test_micro", f"output={name}"])
        model = build_model(cfg.model, cfg.input, output_cfg=cfg.output)
        counted = output_trainable_params(resolve_output_references(cfg.output), 512, 64)
        assert parameter_groups(model)["head_trainable"] == counted, name


def test_tied_head_is_the_input_table_and_adds_nothing():
    model = build("tied")
    assert isinstance(model.head, TiedHead)
    assert not any(k.startswith("head.") for k in model.state_dict())
    untied = build("untied")
    assert parameter_groups(model)["trainable"] == parameter_groups(untied)["trainable"] - 512 * 64
    h = torch.randn(4, 64)
    assert torch.equal(model.head(h), h @ model.input.table.weight.T)


@pytest.mark.parametrize("input_name", ["binary16", "gf2", "frozen_learned", "learned_lowdim"])
def test_tied_without_a_trainable_table_is_one_line_naming_output(input_name):
    with pytest.raises(ConfigError) as err:
        JobSpec.from_cfg(compose_config([f"input={input_name}", "output=tied"]))
    assert err.value.field == "output" and "\n" not in str(err.value) and "output=untied" in str(err.value)
    assert f"input={input_name} " in str(err.value)  # the input as the user named it, not only its type


def test_a_bad_head_setting_names_its_field():
    for overrides, field in [(["output=fixed", "output.scale=0"], "output.scale"),
                             (["output=bitchain", "+output.scale=1"], "output.scale"),
                             (["output=bitchain", "output.code=gaussian16"], "output.code"),
                             (["output=fixed", "output.code=nonesuch"], "output.code"),
                             (["output=untied", "output.type=softmax"], "output.type")]:
        with pytest.raises(ConfigError) as err:
            JobSpec.from_cfg(compose_config(overrides))
        assert err.value.field == field, overrides


def test_every_head_leaves_input_and_blocks_bitwise_alike_at_one_seed():
    reference = {k: v for k, v in build("untied", "binary16").state_dict().items() if module_group(k) != "head"}
    for name in [n for n in HEADS if n != "tied"]:
        state = {k: v for k, v in build(name, "binary16").state_dict().items() if module_group(k) != "head"}
        assert state.keys() == reference.keys()
        assert all(torch.equal(v, reference[k]) for k, v in state.items()), name
    learned = build("untied", "learned").state_dict()
    tied = build("tied", "learned").state_dict()
    assert all(torch.equal(v, learned[k]) for k, v in tied.items())  # the tied model is the untied minus its head


def test_the_untied_default_keeps_its_settings_fingerprint():
    """The axis enters a job's fingerprint only when it is not the untied head, so every earlier job
    keeps its settings hash (and reuse finds it)."""
    default = JobSpec.from_cfg(compose_config([]))
    explicit = JobSpec.from_cfg(compose_config(["output=untied"]))
    assert default.fingerprint["settings_sha"] == explicit.fingerprint["settings_sha"]
    assert not any(k.startswith("output") for k in default.fingerprint["settings"])
    tied = JobSpec.from_cfg(compose_config(["output=tied"]))
    assert tied.fingerprint["settings"]["output.type"] == "tied"
    gf2_chain = JobSpec.from_cfg(compose_config(["output=bitchain_gf2"]))
    assert gf2_chain.fingerprint["settings"]["output.code.matrix_seed"] == 12345  # the code's settings, resolved


@pytest.mark.parametrize("output", ["fixed", "bitchain"])
def test_a_trained_table_free_head_keeps_its_code_and_reloads_exactly(output):
    """Trained through the real job (AdamW over every parameter group): the fixed code is the code it
    was built with, bit for bit, and the checkpoint rebuilds the head and its logits."""
    ckpt_dir, _ = trained_checkpoint("binary16", output)
    loaded = load_checkpoint(ckpt_dir).model
    fresh = build(output, "binary16", "train.tokens=8192")
    if output == "fixed":
        assert isinstance(loaded.head, FixedCodeHead)
        assert torch.equal(loaded.head.code, fresh.head.code)
        assert not torch.equal(loaded.head.proj, fresh.head.proj)  # P did train
    else:
        assert torch.equal(loaded.head.signs, fresh.head.signs) and torch.equal(loaded.head.free, fresh.head.free)
        assert not torch.equal(loaded.head.pair_weight, fresh.head.pair_weight)
    ids = torch.randint(0, 512, (2, 7))
    with torch.no_grad():
        logp = torch.log_softmax(loaded(ids).float(), -1)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, 7), atol=1e-5)


def test_bitchain_full_distribution_in_chunks_is_the_same_distribution():
    """forward evaluates positions CHUNK at a time to bound its (N, V, K) block; the chunking is
    invisible: 150 positions (three chunks, the last partial) match their one-by-one values."""
    head = build("bitchain_gf2").head
    h = torch.randn(2, 75, head.d_model, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        together = head(h)  # (2, 75, V)
        alone = torch.stack([torch.stack([head(h[b, t]) for t in range(75)]) for b in range(2)])
    assert head.CHUNK < 150 and together.shape == (2, 75, 512)
    assert torch.allclose(together, alone, atol=1e-5, rtol=0)  # float32 GEMM rounding of the projections only


def test_describe_outputs_lists_every_head_and_the_fully_table_free_rows(capsys):
    from fixedcode_study.cli.describe import main

    assert main(["outputs=true", "model=test_micro"]) == 0
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| learned") or line.startswith("| binary16")]
    by_pair = {(r[0], r[1]): r for r in rows}
    assert [o for i, o in by_pair if i == "learned"][:3] == ["untied", "tied", "fixed"]  # reading order
    assert ("binary16", "tied") not in by_pair  # no table to tie
    for head in ("fixed", "bitchain", "bitchain_gf2"):
        assert by_pair[("binary16", head)][5] == "0"  # token-specific trainable: none
    assert by_pair[("binary16", "untied")][5] == f"{512 * 64:,}"
