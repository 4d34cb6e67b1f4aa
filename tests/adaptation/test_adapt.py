"""`fixedcode adapt` on tiny models pretrained without a held-out vocabulary (test_micro, 16 steps,
train.heldout_fraction=0.05): each init's new rows are their formula, every arm starts from the same
head rows for H seed for seed, the measures' buckets cover every position, the command writes
adapt.json and repeats its numbers, a model trained on the whole vocabulary is refused in one line,
and `study=` adapts each completed job once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fixedcode_study.adaptation.measures import measure, measure_windows
from fixedcode_study.adaptation.rows import start_head_rows, start_input_rows
from fixedcode_study.data.heldout import heldout_of
from fixedcode_study.data.prepare import prepare
from fixedcode_study.errors import ConfigError
from fixedcode_study.model import init_generator
from fixedcode_study.record.checkpoint import load_checkpoint
from fixedcode_study.spec import JobSpec
from helpers import SMALL_VAL
from helpers.cli import fixedcode

FINAL = "checkpoints/final"
ARMS = ("learned", "binary16", "gf2")


def job_overrides(root: Path, *extra: str) -> list[str]:
    return ["model=test_micro", "logger=csv", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
            SMALL_VAL, f"data.cache_dir={root / 'cache'}", f"out_root={root / 'out'}", *extra]


def train(root: Path, name: str, *extra: str) -> Path:
    from fixedcode_study.config import compose
    from fixedcode_study.training.job import run_job

    job = root / "out" / name
    spec = JobSpec.from_cfg(compose(job_overrides(root, *extra)))
    assert run_job(spec, job).record["status"] == "completed"
    return job


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("adapt")


@pytest.fixture(scope="module")
def jobs(root) -> dict[str, Path]:
    return {arm: train(root, arm, f"input={arm}", "seed=1", "train.heldout_fraction=0.05") for arm in ARMS}


def loaded(job: Path):
    """The checkpoint, its held-out set (as a tensor) and spellings, drawn from the original corpus."""
    checkpoint = load_checkpoint(job / FINAL)
    spec = JobSpec.from_json(checkpoint.config["spec"])
    original = prepare(spec.data.settings, progress=False)
    held, spelled = heldout_of(original, spec.train.heldout_fraction, spec.train.heldout_seed)
    assert held.tolist() == checkpoint.data["heldout"]["ids"]   # the job recorded the same set
    return checkpoint, torch.from_numpy(held.astype(np.int64)), spelled, original


def test_each_init_starts_the_new_rows_by_its_formula(jobs):
    checkpoint, held, spelled, _ = loaded(jobs["learned"])
    before = checkpoint.model.input.table.weight.detach().clone()
    outside = torch.ones(before.shape[0], dtype=torch.bool)
    outside[held] = False
    for init in ("random", "mean", "parts_mean"):
        model = load_checkpoint(jobs["learned"] / FINAL).model
        start_input_rows(model, held, init, spelled, seed=3)
        after = model.input.table.weight.detach()
        assert torch.equal(after[outside], before[outside])      # only H's rows move
        if init == "random":
            want = torch.empty(held.numel(), before.shape[1]).normal_(
                0.0, model.input.init_std, generator=init_generator(3, "adapt.input"))
            assert torch.equal(after[held], want)
        elif init == "mean":
            want = before.numpy()[outside.numpy()].astype(np.float64).mean(axis=0)
            assert np.allclose(after[held].numpy(), want[None, :], rtol=0, atol=1e-7)
        else:
            for token in held.tolist():
                parts = list(spelled[token])
                assert not set(parts) & set(held.tolist())
                want = before.numpy()[parts].astype(np.float64).mean(axis=0)
                assert np.allclose(after[token].numpy(), want, rtol=0, atol=1e-7)
    fixed = load_checkpoint(jobs["binary16"] / FINAL).model
    start_input_rows(fixed, held, "code", spelled, seed=3)   # a fixed code has nothing to start
    with pytest.raises(ConfigError, match=r"^inits: the binary input has no table"):
        start_input_rows(fixed, held, "mean", spelled, seed=3)


def test_every_arm_starts_from_the_same_head_rows_for_h_seed_for_seed(jobs):
    heads = {}
    for arm in ARMS:
        checkpoint, held, _, _ = loaded(jobs[arm])
        model = checkpoint.model
        before = model.head.weight.detach().clone()
        start_head_rows(model, held, "random", seed=0)
        heads[arm] = model.head.weight.detach()[held].clone()
        keep = torch.ones(before.shape[0], dtype=torch.bool)
        keep[held] = False
        assert torch.equal(model.head.weight.detach()[keep], before[keep])
        assert not torch.equal(heads[arm], before[held])
    assert torch.equal(heads["learned"], heads["binary16"]) and torch.equal(heads["learned"], heads["gf2"])
    other = load_checkpoint(jobs["gf2"] / FINAL).model
    start_head_rows(other, held, "random", seed=1)
    assert not torch.equal(other.head.weight.detach()[held], heads["gf2"])   # another seed, other rows
    start_head_rows(other, held, "mean", seed=1)
    mean = other.head.weight.detach()[keep].double().mean(dim=0).float()
    assert torch.allclose(other.head.weight.detach()[held], mean.expand(held.numel(), -1), rtol=0, atol=1e-7)


def test_the_measures_buckets_cover_every_position_and_the_loss_is_cross_entropy(jobs):
    checkpoint, held, _, original = loaded(jobs["binary16"])
    windows = measure_windows(original, 64, 4096)
    got = measure(checkpoint.model, windows, held)
    x, y = windows[:, :-1], windows[:, 1:]
    both = int((torch.isin(x, held) & torch.isin(y, held)).sum())
    counts = got["counts"]
    assert counts["all"] == x.numel() == counts["heldout"] + counts["after_heldout"] + counts["other"] - both + both
    assert counts["heldout"] == int(torch.isin(y, held).sum()) > 0 and counts["after_heldout"] > 0
    with torch.no_grad():
        logits = checkpoint.model(x).float()
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
    assert got["loss"] == pytest.approx(float(ce.double().mean()), rel=1e-6)
    mask = (~torch.isin(x, held) & ~torch.isin(y, held)).reshape(-1)
    assert got["other_loss"] == pytest.approx(float(ce[mask].double().mean()), rel=1e-6)
    mass = torch.softmax(logits, -1)[..., held].sum(-1).double().mean()
    assert got["heldout_mass"] == pytest.approx(float(mass), rel=1e-5)
    # pretrained without H, the model has learned to give H almost nothing
    assert got["heldout_mass"] < 0.05 and got["heldout_loss"] > got["other_loss"]


def test_the_command_writes_adapt_json_and_repeats_its_numbers(jobs, tmp_path):
    args = ["tokens=2048", "batch_size=4", "val_tokens=2048", "val_points=4"]
    run = fixedcode(["adapt", f"checkpoint={jobs['learned']}", *args, f"out={tmp_path / 'a.json'}"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "a.json").read_text())
    assert list(record["runs"]) == ["random", "mean", "parts_mean"] and record["steps"] == 8
    assert record["measured_steps"] == [0, 1, 3, 8] and record["model"]["input"] == "learned"
    assert record["heldout"]["ids"] == load_checkpoint(jobs["learned"] / FINAL).data["heldout"]["ids"]
    for run_ in record["runs"].values():
        assert [row["step"] for row in run_["curve"]] == [0, 1, 3, 8] and len(run_["train_loss"]) == 8
        assert run_["first_mass"] == run_["curve"][0]["heldout_mass"] and run_["finite"]
    # the adaptation learns H: its loss as a target falls
    mean = record["runs"]["mean"]
    assert mean["final"]["heldout_loss"] < mean["curve"][0]["heldout_loss"]
    again = fixedcode(["adapt", f"checkpoint={jobs['learned']}", *args, "inits=mean", f"out={tmp_path / 'b.json'}"],
                      cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "b.json").read_text())["runs"] == {"mean": mean}   # same seed: same numbers
    fixed = fixedcode(["adapt", f"checkpoint={jobs['gf2']}", *args, f"out={tmp_path / 'c.json'}"], cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert list(json.loads((tmp_path / "c.json").read_text())["runs"]) == ["code"]


def test_a_model_trained_on_the_whole_vocabulary_is_refused_in_one_line(root, tmp_path):
    whole = train(root, "whole", "input=learned", "seed=1")
    run = fixedcode(["adapt", f"checkpoint={whole}", f"out={tmp_path / 'a.json'}"], cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith("error: checkpoint: ") and "train.heldout_fraction=0.05" in run.stderr
    assert not (tmp_path / "a.json").exists()
    bad = fixedcode(["adapt", f"checkpoint={whole}", "inits=mean,meen"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: inits: 'meen' is not an init")


STUDY = """name: tinyadapt
description: two arms x two seeds, held-out tokens, adapted
jobs: {cpu: 4, paper: 4}
primary:
  question: Do binary16 models end adaptation with other losses than learned ones?
  comparisons: [binary16 - learned]
  measures: [adapt_heldout_loss, adapt_after_heldout_loss, adapt_other_loss]
adapt: {tokens: 512, batch_size: 4, val_tokens: 512, val_points: 2, inits: "mean,random"}
grids:
  - input: [learned, binary16]
    seed: [1, 2]
    train.heldout_fraction: [0.05]
"""


@pytest.mark.slow
def test_study_adapts_each_completed_job_once_and_the_report_tests_the_declared_measures(root, tmp_path):
    from scipy import stats as sps

    from fixedcode_study.cli.sweep import plan
    from fixedcode_study.studies.study import load_study
    from fixedcode_study.training.job import run_job

    study = tmp_path / "tinyadapt.yaml"
    study.write_text(STUDY)
    # The corpus is the session's (SMALL_VAL's, shared with other tests), not this module's own cache; one
    # thread (out of the job key). The jobs train 4 steps and adapt 2 (each measured at its start and end,
    # on 8 windows): the test reads the records, the runner's bookkeeping and the report's rows recomputed
    # from them, not how well anything learned.
    dropped = ("data.cache_dir=", "out_root=", "train.tokens=")
    overrides = [o for o in job_overrides(root) if not o.startswith(dropped)] + [
        "train.tokens=2048", f"out_root={tmp_path / 'out'}", "threads=1"]
    waiting = fixedcode(["adapt", f"study={study}", "dry_run=true", *overrides], cwd=tmp_path)
    assert waiting.returncode == 0 and "0 adapted, 0 already done, 4 waiting" in waiting.stdout, waiting.stderr
    # the study's four jobs, each planned and run as `fixedcode sweep` runs it (cli/sweep.py's plan, then
    # the job's own procedure), in this process: no `run -m` process to start, importing torch again
    planned = plan(load_study(str(study)), "cpu", overrides)
    assert len(planned) == 4
    for job in planned:
        assert run_job(job.spec, job.job_dir, job.overrides).record["status"] == "completed"
    first = fixedcode(["adapt", f"study={study}", *overrides], cwd=tmp_path)
    assert first.returncode == 0 and "4 adapted, 0 already done" in first.stdout, first.stderr[-3000:]
    study_dir = tmp_path / "out" / "multirun" / "tinyadapt"
    records = {p.parent.name: json.loads(p.read_text()) for p in (study_dir / "adapt").glob("*/adapt.json")}
    assert len(records) == 4
    assert {tuple(r["runs"]) for r in records.values()} == {("random", "mean"), ("code",)}
    second = fixedcode(["adapt", f"study={study}", *overrides], cwd=tmp_path)
    assert "0 adapted, 4 already done" in second.stdout
    refused = fixedcode(["adapt", f"study={study}", "tokens=5", *overrides], cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("error: tokens: does not apply with study=")

    report = tmp_path / "report"
    analyzed = fixedcode(["analyze", str(study_dir), f"study={study}", f"out={report}"], cwd=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    text = (report / "report.md").read_text()
    assert "## Learning new tokens after training" in text and "figures/adaptation_curves.png" in text
    rows = pd.read_csv(report / "tables" / "comparisons.csv")
    primary = rows[rows["family"] == "primary"].set_index("metric")
    assert sorted(primary.index) == sorted(["adapt_heldout_loss", "adapt_after_heldout_loss", "adapt_other_loss"])
    assert set(primary["comparison"]) == {"binary16 − learned"}

    def final(arm: str, init: str, measure: str) -> np.ndarray:
        by_seed = {r["model"]["seed"]: r for r in records.values() if r["model"]["input"] == arm}
        return np.array([by_seed[s]["runs"][init]["final"][measure] for s in (1, 2)])

    for measure in ("heldout_loss", "after_heldout_loss", "other_loss"):   # learned read at its mean init
        a, b = final("binary16", "code", measure), final("learned", "mean", measure)
        row = primary.loc[f"adapt_{measure}"]
        assert row["test"] == "paired" and row["n_pairs"] == 2
        assert row["delta"] == pytest.approx((a - b).mean(), abs=1e-12)
        assert row["p_value"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    mass = rows[rows["metric"] == "adapt_heldout_mass"]
    assert len(mass) and mass["family"].eq("exploratory").all()
    # forgetting without the pretraining gap: the change over the adaptation, exploratory
    change = rows.set_index("metric").loc["adapt_other_loss_change"]
    start = lambda arm, init: np.array([r["runs"][init]["curve"][0]["other_loss"] for r in sorted(
        (r for r in records.values() if r["model"]["input"] == arm), key=lambda r: r["model"]["seed"])])
    want = (final("binary16", "code", "other_loss") - start("binary16", "code")) - \
        (final("learned", "mean", "other_loss") - start("learned", "mean"))
    assert change["family"] == "exploratory" and change["delta"] == pytest.approx(want.mean(), abs=1e-12)
    arms = pd.read_csv(report / "tables" / "adaptation_arms.csv").set_index(["variant", "init", "metric"])
    random = final("learned", "random", "other_loss")
    assert arms.loc[("learned", "random", "adapt_other_loss"), "mean"] == pytest.approx(random.mean(), abs=1e-12)
