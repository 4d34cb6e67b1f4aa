"""`fixedcode compose` and its measures on tiny trained models (test_micro, 16 steps; a learned-input
pair and a binary16 pair, seeds 1 and 2).

The issue's three identities hold bit for bit on CPU, because every loss comes from training's own
final validation and each composite model runs the members' own modules: the ensemble of a model
with itself is the model; the identity stitch of a model with itself is the model at every k; the
barrier path's endpoints are the two members. Besides: validation here reproduces the job's own
results.json `final`; with one fixed code, a's input feeding b's blocks is b; the affine stitch
starts at the identity and its training moves the stitch alone, the same way twice; a mismatched
pair is one line naming the field; the command writes compose.json end to end and repeats its numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fixedcode_study.composition.barrier import alphas, barrier_record
from fixedcode_study.composition.ensemble import ensemble_record
from fixedcode_study.composition.pair import load_pair
from fixedcode_study.composition.settings import ComposeSettings
from fixedcode_study.composition.stitch import AffineStitch, Stitched, stitch_record, train_stitch
from fixedcode_study.composition.validation import HeldOut, validate
from fixedcode_study.errors import ConfigError
from helpers import SMALL_VAL
from helpers.cli import fixedcode

FINAL = "checkpoints/final"


def job_overrides(root: Path, *extra: str) -> list[str]:
    return ["model=test_micro", "logger=csv", "train.tokens=8192", "train.batch_size=8",
            "train.val_points=2", SMALL_VAL, f"data.cache_dir={root / 'cache'}", f"out_root={root / 'out'}", *extra]


def train_arm(root: Path, input_name: str) -> dict[int, Path]:
    """Two job directories of one arm at seeds 1 and 2."""
    from fixedcode_study.config import compose
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    out = {}
    for seed in (1, 2):
        job = root / "out" / f"{input_name}-s{seed}"
        spec = JobSpec.from_cfg(compose(job_overrides(root, f"input={input_name}", f"seed={seed}")))
        assert run_job(spec, job).record["status"] == "completed"
        out[seed] = job
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compose")  # one data cache for every job of this file


@pytest.fixture(scope="module")
def jobs(root) -> dict[int, Path]:
    return train_arm(root, "learned")


@pytest.fixture(scope="module")
def fixed_jobs(root) -> dict[int, Path]:
    return train_arm(root, "binary16")


def pair_of(jobs, a: int, b: int, measures=("ensemble", "stitch", "barrier"), **settings):
    pair = load_pair(jobs[a] / FINAL, jobs[b] / FINAL, measures)
    held_out = HeldOut.of(pair, ComposeSettings(**settings))
    own = {m.role: validate(m.model, held_out) for m in pair.members}
    return pair, held_out, own


def job_final(job: Path) -> dict:
    return json.loads((job / "results.json").read_text())["final"]


def test_validation_here_is_the_jobs_final_validation(jobs):
    _, _, own = pair_of(jobs, 1, 2)
    assert own["a"] == job_final(jobs[1]) and own["b"] == job_final(jobs[2])  # every key, bit for bit


def test_the_ensemble_of_a_model_with_itself_is_the_model(jobs):
    pair, held_out, own = pair_of(jobs, 1, 1, measures=("ensemble",))
    record = ensemble_record(pair, held_out, own)
    assert record["logits"]["val_loss"] == own["a"]["val_loss"] and record["logits"]["val_bpb"] == own["a"]["val_bpb"]
    assert record["logits"]["gain_over_better"] == 0.0
    # the mixture log((p + p) / 2) rounds once more: equal to float tolerance
    assert record["probabilities"]["val_loss"] == pytest.approx(own["a"]["val_loss"], abs=1e-6)


def test_an_identity_stitch_of_a_model_with_itself_is_the_model_at_every_k(jobs):
    pair, held_out, own = pair_of(jobs, 1, 1, measures=("stitch",))
    record = stitch_record(pair, held_out, ComposeSettings(stitch_tokens=0), own)
    assert record["ks"] == [0, 1, 2] and "affine" not in record  # test_micro: 2 blocks; no training asked
    for row in record["identity"]:
        assert row["val_loss"] == own["a"]["val_loss"] and row["minus_a"] == 0.0, row["k"]


def test_the_barrier_paths_endpoints_are_the_members_own_losses(jobs):
    pair, held_out, own = pair_of(jobs, 1, 2, measures=("barrier",))
    record = barrier_record(pair, held_out, own)
    path = record["path"]
    assert [row["alpha"] for row in path] == alphas() == [i / 10 for i in range(11)]
    assert path[0]["val_loss"] == own["a"]["val_loss"] and path[-1]["val_loss"] == own["b"]["val_loss"]
    assert path[0]["excess"] == 0.0 and path[-1]["excess"] == 0.0
    assert record["barrier"] == max(row["excess"] for row in path) >= 0.0
    assert record["barrier"] > 0.0  # two seeds, no alignment: the middle of the line is worse (0.28 nats here)


def test_with_one_fixed_code_the_identity_stitch_at_k0_is_b_itself(fixed_jobs):
    """The issue's premise: two models of one fixed input agree on what their first block receives, so
    a's input feeding b's blocks is b (a learned pair's k = 0 is not: its tables differ)."""
    pair, held_out, own = pair_of(fixed_jobs, 1, 2)  # the barrier's check passes too: one code, equal buffers
    record = stitch_record(pair, held_out, ComposeSettings(stitch_tokens=0), own)
    assert record["identity"][0]["val_loss"] == own["b"]["val_loss"] != own["a"]["val_loss"]


def test_the_affine_stitch_starts_at_the_identity_and_training_moves_only_the_stitch(jobs):
    pair, held_out, _ = pair_of(jobs, 1, 2, measures=("stitch",))
    d = pair.a.model.config.d_model
    stitch = AffineStitch(d)
    assert torch.equal(stitch.linear.weight, torch.eye(d)) and torch.equal(stitch.linear.bias, torch.zeros(d))
    h = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(0))
    assert torch.equal(stitch(h), h)
    members = {role: {k: v.clone() for k, v in m.model.state_dict().items()} for role, m in zip("ab", pair.members)}
    settings = ComposeSettings(stitch_tokens=2048, stitch_batch_size=4)
    facts = train_stitch(Stitched(pair.a.model, pair.b.model, 1, stitch), held_out, settings)
    assert facts["steps"] == 8 and facts["tokens"] == 2048
    for role, m in zip("ab", pair.members):
        after = m.model.state_dict()
        assert all(torch.equal(after[k], v) for k, v in members[role].items()), role
        assert all(p.requires_grad for p in m.model.parameters())  # the freeze is undone
    assert not torch.equal(stitch.linear.weight, torch.eye(d)) and facts["weight_rel_change"] > 0
    again = AffineStitch(d)
    train_stitch(Stitched(pair.a.model, pair.b.model, 1, again), held_out, settings)
    assert torch.equal(again.linear.weight, stitch.linear.weight)  # seeded batches, identity init: repeatable


def mismatched(jobs, root: Path, *overrides: str, data: dict | None = None) -> Path:
    """A test_micro checkpoint beside seed 1's, built from its settings with `overrides` (untrained)."""
    from fixedcode_study.build import build_decoder
    from fixedcode_study.config import compose
    from fixedcode_study.record.checkpoint import load_checkpoint, save_checkpoint
    from fixedcode_study.spec import JobSpec

    reference = load_checkpoint(jobs[1] / FINAL)
    spec = JobSpec.from_cfg(compose(job_overrides(root, *overrides)))
    config = {**spec.checkpoint_config(), "data": data or reference.data}
    return save_checkpoint(root / "_".join(overrides).replace("=", "-"), build_decoder(spec.model, seed=1), config,
                           jobs[1] / FINAL / "tokenizer.json")


@pytest.mark.parametrize("overrides, data, measures, field", [
    (["model.vocab_size=520"], None, ("ensemble",), "model.vocab_size"),
    (["model.n_layer=3"], None, ("ensemble",), "model.n_layer"),
    (["model.d_ff=96"], None, ("stitch",), "model.d_ff"),
    ([], {"cache_key": "0123456789abcdef0123"}, ("ensemble",), "data"),
    (["input=binary16"], None, ("barrier",), "input"),
], ids=["vocabulary", "depth", "mlp-width", "corpus", "barrier-across-inputs"])
def test_a_mismatched_pair_is_one_line_naming_the_field(jobs, tmp_path, overrides, data, measures, field):
    other = mismatched(jobs, tmp_path, *overrides, data=data)
    with pytest.raises(ConfigError) as err:
        load_pair(jobs[1] / FINAL, other, measures)
    assert err.value.field == field and "\n" not in str(err.value), str(err.value)


def test_inputs_may_differ_where_the_measure_allows_it(jobs, tmp_path):
    other = mismatched(jobs, tmp_path, "input=binary16")
    load_pair(jobs[1] / FINAL, other, ("ensemble", "stitch"))  # a learned input's states may feed a fixed-code model


def test_the_command_writes_compose_json_and_repeats_its_numbers(jobs, tmp_path):
    args = [f"a={jobs[1]}", f"b={jobs[2]}", "stitch_tokens=1024", "stitch_batch_size=4"]
    run = fixedcode(["compose", *args, f"out={tmp_path / 'compose.json'}"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "barrier (no alignment, 11 points)" in run.stdout and "stitch a -> b, affine: k=0" in run.stdout
    record = json.loads((tmp_path / "compose.json").read_text())
    assert record["members"]["a"] == record["a"]["job_final"] == job_final(jobs[1])
    assert record["a"]["fingerprint"] != record["b"]["fingerprint"] and record["a"]["spec"]["seed"] == 1
    assert record["settings"]["seed"] == 0 and record["settings"]["stitch_tokens"] == 1024
    assert [r["k"] for r in record["stitch"]["affine"]] == [0, 1, 2] and len(record["barrier"]["path"]) == 11
    ensemble = record["ensemble"]["logits"]
    better = min(record["members"][m]["val_loss"] for m in "ab")
    assert ensemble["gain_over_better"] == pytest.approx(better - ensemble["val_loss"])

    again = fixedcode(["compose", *args, "measures=stitch", f"out={tmp_path / 'again.json'}"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    repeated = json.loads((tmp_path / "again.json").read_text())
    assert repeated["stitch"] == record["stitch"] and "barrier" not in repeated  # same seed: the same numbers


def test_the_command_refuses_a_mismatched_pair_in_one_line(jobs, tmp_path):
    other = mismatched(jobs, tmp_path, "model.n_layer=3")
    run = fixedcode(["compose", f"a={jobs[1]}", f"b={other}", f"out={tmp_path / 'compose.json'}"], cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.strip().startswith("error: model.n_layer: a has 2, b has 3")
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "compose.json").exists()
    nothing = fixedcode(["compose", f"a={tmp_path}", f"b={jobs[2]}"], cwd=tmp_path)  # a folder without a model
    assert nothing.returncode == 2 and nothing.stderr.strip().startswith("error: a: ")
