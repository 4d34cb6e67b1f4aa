"""The shared decoder: exact paper parameter counts, causality, untied head."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fixedcode_study.build import build_model
from fixedcode_study.config import compose as compose_config
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.description import describe as describe_spec


def describe(cfg):
    """The describe dict of a composed config, resolved as `fixedcode describe` resolves it."""
    return describe_spec(JobSpec.from_cfg(cfg))


PAPER_TABLE = 49_152 * 2_048


@pytest.mark.parametrize(
    "input_name, trainable",
    [("learned", 1_812_039_680), ("binary16", 1_711_376_384), ("gf2", 1_711_376_384)],
)
def test_describe_gives_the_paper_counts(input_name, trainable):
    info = describe(compose_config(["model=paper_1p7b", f"input={input_name}"]))
    params = info["params"]
    assert params["trainable"] == trainable
    assert params["head"] == PAPER_TABLE == 100_663_296
    assert params["input_trainable"] == (PAPER_TABLE if input_name == "learned" else 0)
    assert params["body"] + params["head"] + params["input_trainable"] == trainable
    if input_name != "learned":
        props = info["input_props"]
        assert props["code_width"] == 16 and props["tile_factor"] == 128 and props["injective"] is True
        assert props["values"] == "{0,1}"
    if input_name == "gf2":
        assert info["input_props"]["gf2_rank"] == 16 and info["input_props"]["matrix_seed"] == 12345


def test_describe_cli_prints_json():
    out = subprocess.run([sys.executable, "-m", "fixedcode_study", "describe", "model=paper_1p7b", "input=learned"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["params"]["trainable"] == 1_812_039_680


def test_decoder_is_causal_and_head_is_untied():
    torch.manual_seed(0)
    model = build_model({"vocab_size": 256, "n_layer": 2, "n_head": 2, "n_kv_head": 1, "d_model": 32,
                         "d_ff": 64, "max_seq_len": 16}, {"type": "learned"}).eval()
    x = torch.randint(0, 256, (1, 16))
    y = x.clone()
    y[0, 10:] = (y[0, 10:] + 1) % 256
    with torch.no_grad():
        a, b = model(x), model(y)
    assert torch.allclose(a[0, :10], b[0, :10], atol=0, rtol=0)
    assert not torch.allclose(a[0, 10:], b[0, 10:])
    assert model.head.weight.data_ptr() != model.input.table.weight.data_ptr()


def test_sequence_longer_than_context_is_refused():
    model = build_model({"vocab_size": 256, "n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64,
                         "max_seq_len": 8}, {"type": "binary", "code_width": 8})
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.parametrize("input_cfg", [{"type": "learned"}, {"type": "binary", "code_width": 16},
                                       {"type": "gf2", "code_width": 16}])
def test_model_cast_to_bf16_runs_for_every_input(input_cfg):
    """Evaluation may cast the whole model (eval.dtype=bfloat16); fixed codes must follow the weights' dtype."""
    model = build_model({"vocab_size": 512, "n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64,
                         "max_seq_len": 16}, input_cfg).to(torch.bfloat16)
    with torch.no_grad():
        assert model(torch.randint(0, 512, (2, 8))).dtype == torch.bfloat16
    if input_cfg["type"] == "gf2":  # the recoding stays exact in bf16 (integer sums <= 16)
        ids = torch.arange(512)[None]
        assert torch.equal(model.input(ids).float(), model.float().input(ids))


def test_the_teacher_forced_loss_scores_the_targets_not_the_inputs():
    """A teacher-forced head (the bit chain) returns the per-token NLL from forward(idx, targets): the
    full distribution's value at each target."""
    cfg = compose_config(["model=test_micro", "input=binary16", "output=bitchain"])
    model = build_model(cfg.model, cfg.input, seed=1, output_cfg=cfg.output)
    idx = torch.randint(0, 512, (2, 8), generator=torch.Generator().manual_seed(0))
    targets = torch.roll(idx, -1, dims=1)
    with torch.no_grad():
        nll, logp = model(idx, targets), model(idx)
    assert model.head.teacher_forced and nll.shape == targets.shape
    assert torch.allclose(nll, -logp.gather(-1, targets[..., None]).squeeze(-1), atol=1e-5)
