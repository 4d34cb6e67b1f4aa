"""The resolved job spec (spec/job.py): a composed config read once into frozen objects, and every
figure of a job taken from the model that is actually built.

A *_sizematched input trains a wider body than its preset: its FLOPs per token, the compile
decision of train.compile=auto and results.json's flops_per_token must all be the built model's.
Before the spec, the compile decision read the preset's FLOPs while the record read the built
model's, so such a job carried two FLOPs figures.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from fixedcode_study.accounting import flops_per_token
from fixedcode_study.build import build_decoder
from fixedcode_study.config import CONFIG_DIR, compose, job_config
from fixedcode_study.errors import ConfigError
from fixedcode_study.spec import JobSpec, TrainSpec
from fixedcode_study.training.job import run_job

SIZE_MATCHED = sorted(p.stem for p in Path(CONFIG_DIR, "input").glob("*sizematched*.yaml"))
ONE_STEP = ["model=test_micro", "logger=csv", "train.tokens=1024", "train.val_points=1", "train.compile=false"]


def test_every_size_matched_input_is_covered():
    assert len(SIZE_MATCHED) >= 4 and "binary16_sizematched" in SIZE_MATCHED


@pytest.mark.parametrize("name", SIZE_MATCHED)
def test_compile_decision_reads_the_built_models_flops(name):
    base = ["model=cpu_tiny", f"input={name}", "logger=csv", "train.compile=auto"]
    spec = JobSpec.from_cfg(compose(base))
    with torch.device("meta"):
        built = build_decoder(spec.model, seed=spec.seed)
    seq_len, tokens = spec.plan.seq_len, spec.plan.tokens
    own = flops_per_token(built.config, seq_len)["total"]
    preset = flops_per_token(spec.model.preset, seq_len)["total"]
    assert spec.model.flops_per_token(seq_len) == own and own > preset  # the wider body costs more
    # A threshold between the preset's and the built model's training FLOPs tells them apart: the
    # job compiles because the model it trains is above it.
    between = (preset + own) / 2 * tokens
    assert JobSpec.from_cfg(compose([*base, f"train.compile_min_flops={between}"])).runtime.compile
    assert not JobSpec.from_cfg(compose([*base, f"train.compile_min_flops={own * tokens * 1.001}"])).runtime.compile


# One trained job in the default suite; the other inputs train too under -m slow (a job each).
@pytest.mark.parametrize("name", [n if n == "binary16_sizematched" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in SIZE_MATCHED])
def test_recorded_flops_are_the_built_models(name, tmp_path):
    spec = JobSpec.from_cfg(compose([*ONE_STEP, f"input={name}", f"out_root={tmp_path}"]))
    record = run_job(spec, tmp_path / "job").record
    assert record["status"] == "completed"
    built = record["input_props"]  # the size matching the trained model was built with
    assert (built["size_match_d_ff"], built["size_match_n_layer"]) == (spec.model.config.d_ff, spec.model.config.n_layer)
    assert record["flops_per_token"] == spec.model.flops_per_token(spec.plan.seq_len)
    assert record["flops_per_token"] > flops_per_token(spec.model.preset, spec.plan.seq_len)["total"]
    assert record["runtime"]["compile"] is spec.runtime.compile is False
    assert record["fingerprint"]["settings"]["plan.compile"] is False


@pytest.mark.parametrize("name", ["learned", "binary16", "gf2", "learned_codestats"])
def test_inputs_without_size_matching_build_the_preset(name):
    spec = JobSpec.from_cfg(compose(["model=cpu_tiny", f"input={name}", "logger=csv"]))
    assert spec.model.config == spec.model.preset and spec.model.size_record == {}
    assert spec.runtime.compile  # cpu_tiny at the default budget: 4.6e12 training FLOPs


def test_the_spec_is_frozen_and_resolves_input_references():
    spec = JobSpec.from_cfg(compose(["model=test_micro", "input=learned_codestats", "logger=csv"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 2  # type: ignore[misc]
    assert spec.model.input["init_code"]["type"] == "binary"  # binary16's settings, from conf/input
    assert spec.composed["input"]["init_code"] == "binary16"  # the record keeps the config as composed
    assert spec.fingerprint["settings"]["input.init_code.code_width"] == 16  # hashed as resolved
    assert spec.validation_steps[-1] == spec.plan.max_steps
    assert spec.checkpoint.preempt_signals == ("SIGTERM", "SIGUSR1", "SIGUSR2") and spec.eval is None


@pytest.mark.parametrize("override, field", [
    ("threads=0", "threads"),
    ("train.compile=yes", "train.compile"),
    ("train.val_points=0", "train.val_points"),
    ("checkpoint.preempt_signals=[SIGNOPE]", "checkpoint.preempt_signals"),
    ("input.type=embedding", "input.type"),
    ("+input.bogus=1", "input.bogus"),
    ("optim.lr=nan", "optim.lr"),
    ("optim.betas=[0.9,1.5]", "optim.betas[1]"),
    ("data.val_fraction=1.5", "data.val_fraction"),
    ("train.global_batch_tokens=0", "train.global_batch_tokens"),
    ("train.seq_len=65", "train.seq_len"),  # above test_micro's max_seq_len
    ("trainer.gradient_clip_val=-1", "trainer.gradient_clip_val"),
    ("logger.wandb.mode=sometimes", "logger.wandb.mode"),
    ("+train.typo=1", "train.typo"),  # a key no spec knows is refused, not carried along unread
    ("+optim.typo=1", "optim.typo"),
    ("+checkpoint.typo=1", "checkpoint.typo"),
    ("+typo=1", "typo"),
])
def test_bad_settings_stop_at_resolution_with_one_line(override, field):
    with pytest.raises(ConfigError) as err:
        JobSpec.from_cfg(compose(["model=test_micro", override]))
    assert err.value.field == field and "\n" not in str(err.value)


def test_eval_settings_are_validated_at_resolution():
    spec = JobSpec.from_cfg(compose(["model=test_micro", "logger=csv", "eval=builtin", "eval.limit=4"]))
    assert spec.eval_name == "builtin" and spec.eval.limit == 4 and spec.eval.batch_size == 32
    with pytest.raises(ConfigError, match=r"^eval.batch_size"):
        JobSpec.from_cfg(compose(["model=test_micro", "logger=csv", "eval=builtin", "eval.batch_size=0"]))


def test_a_key_missing_from_the_composed_config_is_named_not_defaulted():
    config = job_config(compose(["model=test_micro", "logger=csv"]))
    del config["checkpoint"]["resume"]
    with pytest.raises(ConfigError, match=r"^checkpoint.resume: is missing from the composed config"):
        JobSpec.from_cfg(config)


ROUND_TRIPS = [[], ["input=gaussian16"], ["input=learned_codestats"], ["input=binary16_sizematched_isoflop", "eval=builtin"],
               ["output=fixed"], ["input=gf2", "output=bitchain_gf2"], ["logger=csv", "train.global_batch_tokens=2048"],
               ["trainer=fsdp"], ["experiment=gpu_quick"], ["experiment=paper_v1"]]


@pytest.mark.parametrize("overrides", ROUND_TRIPS, ids=lambda o: " ".join(o) or "defaults")
def test_the_spec_round_trips_through_json_exactly(overrides):
    """JobSpec.to_json -> JSON text -> from_json gives an equal spec, typed as before (tuples stay
    tuples, parts stay their classes), and the same text again: what results.json and every
    checkpoint store is the spec itself."""
    spec = JobSpec.from_cfg(compose(overrides))
    text = json.dumps(spec.to_json(), sort_keys=True)
    back = JobSpec.from_json(json.loads(text))
    assert back == spec and json.dumps(back.to_json(), sort_keys=True) == text
    assert isinstance(back.train, TrainSpec) and isinstance(back.model.config, type(spec.model.config))
    assert isinstance(back.validation_steps, tuple) and isinstance(back.checkpoint.preempt_signals, tuple)
    assert (back.eval is None) == (spec.eval is None) and back.fingerprint == spec.fingerprint


def test_every_part_checks_itself_where_it_is_built():
    """The parts validate in __post_init__: one built directly (here by dataclasses.replace) is
    checked like one the front door builds."""
    spec = JobSpec.from_cfg(compose(["model=test_micro"]))
    for part, change, field in ((spec.optim, {"lr": float("nan")}, "optim.lr"),
                                (spec.train, {"val_schedule": "linear"}, "train.val_schedule"),
                                (spec.train, {"tokens": 0}, "train.tokens"),
                                (spec.checkpoint, {"preempt_signals": ("SIGNOPE",)}, "checkpoint.preempt_signals"),
                                (spec.eval or JobSpec.from_cfg(compose(["eval=builtin"])).eval, {"batch_size": 0},
                                 "eval.batch_size")):
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(part, **change)
        assert err.value.field == field and "\n" not in str(err.value)


def test_a_new_data_key_reaches_data_and_the_fingerprint_unchanged():
    """DataSpec carries the data group whole: a key conf/data gains is read by data/ and hashed, with
    no change to the spec."""
    plain_spec = JobSpec.from_cfg(compose(["model=test_micro"]))
    spec = JobSpec.from_cfg(compose(["model=test_micro", "+data.new_key=7"]))
    assert spec.data.settings["new_key"] == 7 and spec.data.name == "shakespeare"
    assert spec.fingerprint["settings"]["data.new_key"] == 7
    assert spec.fingerprint["settings_sha"] != plain_spec.fingerprint["settings_sha"]
