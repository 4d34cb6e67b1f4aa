"""Sweep files (sweeps/*.yaml: studies/study.py), their cost (studies/cost.py) and the sweep command
(cli/sweep.py, which composes the jobs): job counts and contents without training; one study end to
end at a tiny budget (slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import SMALL_VAL
from helpers.cli import fixedcode

from fixedcode_study.cli import sweep as command
from fixedcode_study.config import compose
from fixedcode_study.errors import ConfigError
from fixedcode_study.studies import cost
from fixedcode_study.studies import study as studies

REPO_ROOT = Path(__file__).resolve().parents[2]
STUDIES = ["main", "code_width", "gf2_matrices", "scale_matching", "controls", "model_size", "tuned_lr"]


def keys(jobs) -> set[str]:
    return {j.job_dir.name for j in jobs}


GUTENBERG = REPO_ROOT.parent / "shared" / "data" / "corpus" / "gutenberg"
BOOKS = 8  # the smallest books of the sample: ~0.5 MB, a full 4,096-token BPE, 7 books to train on and 1 held out


@pytest.fixture(scope="module")
def out_root(tmp_path_factory):
    """FIXEDCODE_OUT for the planned jobs, and FIXEDCODE_GUTENBERG (conf/data/gutenberg.yaml's folder) set
    to a few books of the sample: a study's jobs, their count and directories do not depend on the books
    (job keys are the overrides), but a spelling input's code is computed from the job's tokenizer, and
    preparing the whole 69 MB sample for it (its BPE and tokens) was most of the planning of
    input_continuum. `fixedcode sweep input_continuum dry_run=true` on the whole sample is run by the
    documented-commands runner (tests/cli/test_cli_docs_run.py)."""
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("sweep_out")
        mp.setenv("FIXEDCODE_OUT", str(root))
        if GUTENBERG.is_dir():  # else the spelling arms' data has "no files match" and `planned` skips them
            books = tmp_path_factory.mktemp("gutenberg_books")
            for path in sorted(GUTENBERG.glob("*.txt"), key=lambda p: (p.stat().st_size, p.name))[:BOOKS]:
                (books / path.name).symlink_to(path)
            mp.setenv("FIXEDCODE_GUTENBERG", str(books))
        yield root


_PLANS: dict = {}


@pytest.fixture(scope="module")
def planned(out_root):
    """Every study's jobs at both scales, composed once per module (composing is the slow part)."""
    def get(name: str, scale: str = "cpu"):
        if (name, scale) not in _PLANS:
            try:
                _PLANS[name, scale] = command.plan(studies.load_study(name), scale)
            except ConfigError as err:
                # A spelling input's code is computed from the job's tokenizer (spec/vocabulary.py): at
                # paper scale that is SmolLM2's, from the Hub, which this offline machine cannot reach;
                # at CPU scale it is trained on the shared Gutenberg sample, which a checkout may lack.
                missing_data = err.field == "data.paths" and "no files match" in str(err)
                if err.field != "data.tokenizer" and not missing_data or "\n" in str(err):
                    raise
                _PLANS[name, scale] = err
        if isinstance(_PLANS[name, scale], ConfigError):
            pytest.skip(f"{name} at {scale} scale needs its tokenizer's data: {_PLANS[name, scale]}")
        return _PLANS[name, scale]
    return get


# Composing every job of every study at both scales (about 900 Hydra compositions, ~10 minutes of one
# core) is the slow tier's; the default suite composes main's.
EVERY_STUDY = [pytest.param(name, marks=() if name == "main" else pytest.mark.slow)
               for name in studies.available_studies()]


def test_every_required_study_has_a_file():
    assert set(STUDIES) <= set(studies.available_studies())


@pytest.mark.parametrize("name", EVERY_STUDY)
@pytest.mark.parametrize("scale", studies.SCALES)
def test_study_job_count_and_directories(name, scale, planned, out_root):
    study = studies.load_study(name)
    jobs = planned(name, scale)
    assert len(jobs) == study.jobs[scale]  # the count the file states is the count Hydra launches
    assert len(keys(jobs)) == len(jobs)
    for job in jobs:
        assert job.job_dir.parent == out_root / "multirun" / name  # one directory per study
        assert job.spec.name == name and f"name={name}" in job.overrides
    assert study.description and study.cost


@pytest.mark.parametrize("name", EVERY_STUDY)
def test_every_cpu_job_builds(name, planned):
    facts = cost.job_facts(planned(name, "cpu"))  # raises ConfigError on a bad job
    assert all(f["flops"] > 0 and f["trainable"] > 0 for f in facts)


@pytest.mark.slow
def test_every_paper_scale_model_and_input_builds(planned):
    """The paper scale of each study builds too (shapes only): one job per distinct (model, input)."""
    seen, budgets = {}, {}
    for name in studies.available_studies():
        # a study with a token axis at paper scale (compute_ladder) trains its own budgets
        target = budgets if "train.tokens" in studies.load_study(name).scales.get("paper", {}) else seen
        if name == "input_continuum" and not _has_paper_tokenizer():
            continue  # its spelling arms need SmolLM2's tokenizer (from the Hub): test_study_job_count skips it
        for job in planned(name, "paper"):
            target.setdefault((job.spec.model_name, json.dumps(job.spec.composed["input"], sort_keys=True, default=str)), job)
    facts = cost.job_facts(list(seen.values()))
    assert {f["model"] for f in facts + cost.job_facts(list(budgets.values()))} == {
        "smollm2_135m", "smollm2_360m", "paper_1p7b"}
    # experiment=paper_1p7b: 100B tokens, rounded up to whole optimizer steps (the cost counts the tokens
    # a job trains; the controls' *_isoflop arms train fewer, see test_controls.py)
    assert all(100_000_000_000 <= f["tokens"] < 100_010_000_000 for f in facts if not f["input"].endswith("_isoflop"))


def _has_paper_tokenizer() -> bool:
    try:
        command.plan(studies.load_study("input_continuum"), "paper", ["input=spelling", "seed=1"])
    except ConfigError as err:
        if err.field == "data.tokenizer":
            return False
        raise
    return True


def test_main_is_the_documented_hydra_command(planned):
    jobs = planned("main")
    assert keys(jobs) == {f"input={i},seed={s}" for i in ("learned", "binary16", "gf2") for s in (1, 2, 3)}
    # Same directories as the documented command (name=main is the default and not in job keys).
    direct = [compose(o, return_hydra_config=True) for o in studies.expand(["input=learned,binary16,gf2", "seed=1,2,3"])]
    assert {str(c.hydra.sweep.subdir) for c in direct} == keys(jobs)
    assert {str(c.hydra.sweep.dir) for c in direct} == {str(jobs[0].job_dir.parent)}


@pytest.mark.slow
def test_study_contents(planned):
    def props(name):
        return [(j.spec.input_name, dict(j.spec.composed["input"]), j.spec.seed) for j in planned(name)]

    widths = {(n, i.get("code_width")) for n, i, _ in props("code_width")}
    assert widths == {("learned", None), ("binary", None), ("binary16", 16), ("wide", 24), ("wide", 32),
                      ("wide", 64), ("wide_random", 32)}
    gf2 = props("gf2_matrices")
    assert {i["matrix_seed"] for n, i, _ in gf2 if n == "gf2"} == {12345, 1, 2, 3, 4}
    assert {i["min_weight"] for n, i, _ in gf2 if n == "gf2"} == {1, 4, 8}
    assert sum(1 for n, i, _ in gf2 if n == "gf2" and i["affine"]) == 3
    scales = {(i["values"], i["scale"]) for n, i, _ in props("scale_matching") if n == "binary16"}
    assert scales == {(v, s) for v in ("01", "pm1") for s in (1.0, 0.1, "match_init")}  # "01" stays a string
    controls = list(dict.fromkeys(n for n, _, _ in props("controls")))  # arms in the study's order
    assert controls == ["learned", "binary16", "binary16_permuted", "gaussian16", "frozen_learned", "learned_lowdim",
                        "binary16_sizematched", "gf2_sizematched", "binary16_sizematched_isoflop",
                        "gf2_sizematched_isoflop"]
    tuned = [(j.spec.input_name, j.spec.optim.lr) for j in planned("tuned_lr")]
    assert {n for n, _ in tuned} == {"learned", "binary16", "gf2"}
    assert {lr for _, lr in tuned} == {1.5e-3, 3e-3, 6e-3, 1.2e-2}
    assert 3e-3 == compose_default_lr()  # the grid is centred on conf/optim's default
    assert {j.spec.optim.lr for j in planned("tuned_lr", "paper")} == {1.5e-4, 3e-4, 6e-4, 1.2e-3}
    assert {j.spec.model_name for j in planned("model_size")} == {"cpu_tiny", "cpu_30m"}
    assert {j.spec.model_name for j in planned("model_size", "paper")} == {
        "smollm2_135m", "smollm2_360m", "paper_1p7b"}
    continuum = props("input_continuum")
    assert list(dict.fromkeys(n for n, _, _ in continuum)) == [
        "learned", "binary16", "binary16_linear", "binary16_mlp", "binary16_mlp_wide", "learned_lowrank4",
        "learned_lowrank", "learned_lowdim", "spelling", "spelling_mlp"]
    contexts = {(j.spec.model_name, j.spec.data.name, j.spec.train.tokens, j.spec.seed) for j in planned("input_continuum")}
    assert contexts == {("cpu_tiny", "shakespeare", 524288, s) for s in range(1, 6)} | {
        ("ladder_d64", "gutenberg", 2097152, s) for s in (1, 2, 3)}
    # the two teams: each pair a half-1 model (odd seed) and a half-2 model (even seed), every arm
    teams = {(j.spec.input_name, j.spec.seed, j.spec.train.data_part) for j in planned("composition_teams")}
    assert teams == {(arm, s, "1/2" if s % 2 else "2/2") for arm in ("learned", "binary16", "gf2") for s in range(1, 7)}
    assert {j.spec.train.data_part for j in planned("composition")} == {None}
    seeds = {"input_continuum": {1, 2, 3, 4, 5}, "composition": {1, 2, 3, 4, 5, 6},   # three pairs of seeds
             "composition_teams": {1, 2, 3, 4, 5, 6}}
    for name in studies.available_studies():
        assert {s for _, _, s in props(name)} == seeds.get(name, {1, 2, 3}), name


def compose_default_lr() -> float:
    return float(compose([]).optim.lr)


@pytest.mark.slow
def test_the_composition_study_declares_its_pairs_on_jobs_it_trains(planned):
    study = studies.load_study("composition")
    assert study.pairs.arms == ("learned", "binary16", "gf2") and study.pairs.seeds == ((1, 2), (3, 4), (5, 6))
    assert study.pairs.settings.stitch_tokens == 131072 and study.pairs.settings.measure_names == (
        "ensemble", "stitch", "barrier")
    assert [p.name for p in study.pairs.pairs][:2] == ["learned,seeds=1+2", "learned,seeds=3+4"]
    trained = {(j.spec.input_name, j.spec.seed) for j in planned("composition")}
    assert {(p.arm, s) for p in study.pairs.pairs for s in (p.a, p.b)} == trained   # every job is in one pair
    assert studies.load_study("main").pairs is None   # the key is optional


GOOD_PAIRS = "pairs:\n  arms: [learned]\n  seeds: [[1, 2]]\n"


@pytest.mark.parametrize(("block", "field", "words"), [
    ("pairs: [learned]\n", "tiny.yaml:pairs", "is not a mapping"),
    ("pairs:\n  arms: [learned]\n  seeds: [[1, 2]]\n  k: 1\n", "tiny.yaml:pairs.k", "is not a key of pairs"),
    ("pairs:\n  arms: []\n  seeds: [[1, 2]]\n", "tiny.yaml:pairs.arms", "is not a list of input names"),
    ("pairs:\n  arms: [gf2, gf2]\n  seeds: [[1, 2]]\n", "tiny.yaml:pairs.arms", "listed twice"),
    ("pairs:\n  arms: [learned]\n  seeds: [[1, 2], [3]]\n", "tiny.yaml:pairs.seeds[1]", "is not two seeds"),
    ("pairs:\n  arms: [learned]\n  seeds: [[1, 1]]\n", "tiny.yaml:pairs.seeds[0]", "with itself"),
    ("pairs:\n  arms: [learned]\n  seeds: [[1, 2], [2, 3]]\n", "tiny.yaml:pairs.seeds[1]", "already in another pair"),
    (GOOD_PAIRS + "  settings: {stitch_steps: 4}\n", "tiny.yaml:pairs.settings.stitch_steps", "not a compose setting"),
    (GOOD_PAIRS + "  settings: {stitch_tokens: many}\n", "tiny.yaml:pairs.settings.stitch_tokens", "whole number"),
    (GOOD_PAIRS + "  settings: {stitch_tokens: -1}\n", "tiny.yaml:pairs.settings.stitch_tokens", "below 0"),
    (GOOD_PAIRS + "  settings: {measures: 'ensemble,sew'}\n", "tiny.yaml:pairs.settings.measures", "not a measure"),
], ids=["not-a-mapping", "unknown-key", "no-arms", "arm-twice", "one-seed", "same-seed", "seed-twice",
        "unknown-setting", "setting-kind", "setting-value", "measure"])
def test_a_bad_pairs_entry_is_one_line_naming_the_field(tmp_path, block, field, words):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\ndescription: d\njobs: {cpu: 2, paper: 2}\ngrids:\n  - {input: learned, seed: [1, 2]}\n"
                    + block)
    with pytest.raises(ConfigError) as err:
        studies.load_study(str(path))
    assert err.value.field == field and words in err.value.problem + err.value.fix, str(err.value)
    assert "\n" not in str(err.value)


def test_extra_overrides_replace_grid_keys_or_apply_to_all():
    study = studies.load_study("model_size")
    jobs = command.plan(study, "cpu", ["seed=1", "model=test_micro", "train.tokens=4096"])
    assert len(jobs) == 3
    assert all(j.spec.model_name == "test_micro" and j.spec.train.tokens == 4096 and j.spec.seed == 1 for j in jobs)
    assert studies.launch_overrides(study, "cpu", ["seed=1"])[0][0] == "name=model_size"


def test_invalid_job_in_a_study_fails_before_launch_and_names_the_job():
    jobs = command.plan(studies.load_study("code_width"), "cpu", ["model=test_micro", "seed=1"])
    cost.job_facts(jobs)  # widths up to 64 fit test_micro's d_model=64
    with pytest.raises(ConfigError) as err:  # the job's spec refuses it: the study stops before any job launches
        command.plan(studies.load_study("code_width"), "cpu", ["model=test_micro", "model.d_model=32", "model.n_head=2", "seed=1"])
    assert err.value.field == "model.d_model" and "(in job " in str(err.value) and "\n" not in str(err.value)


def test_cli_dry_run_lists_commands_jobs_and_cost(capsys):
    command.main(["main", "dry_run=true"])
    out = capsys.readouterr().out
    assert "$ python -m fixedcode_study.run -m name=main input=learned,binary16,gf2 seed=1,2,3" in out
    assert out.count("input=gf2,seed=") == 3 and "CPU-hours" in out
    command.main(["controls", "dry_run=true", "scale=paper"])
    assert "GPU-hours" in capsys.readouterr().out
    assert command.main(["nonexistent", "dry_run=true"]) == 2


def test_cli_settings_and_overrides_in_any_order_give_the_same_plan(capsys, monkeypatch):
    """scale=/dry_run=/verbose= and the overrides in any order: the same plan."""
    monkeypatch.setenv("FIXEDCODE_VERBOSE", "0")  # restored after the test: verbose=true sets it in this process
    assert command.main(["seed=1", "main", "scale=paper", "train.tokens=4096", "dry_run=true", "verbose=true"]) == 0
    first = capsys.readouterr().out
    assert os.environ.get("FIXEDCODE_VERBOSE") == "1"  # verbose=true: inherited by every grid's run -m
    assert command.main(["main", "scale=paper", "seed=1", "dry_run=true", "train.tokens=4096"]) == 0
    assert capsys.readouterr().out == first and "study main (scale paper): 3 jobs" in first
    assert " seed=1 " in first and " train.tokens=4096" in first and "GPU-hours" in first


@pytest.mark.parametrize(("argv", "field"), [
    (["nonexistent", "dry_run=true"], "study"), (["main", "scale=gpu", "dry_run=true"], "scale"),
    (["main", "--bogus"], "--bogus"), (["main", "scale=gpu"], "scale"), (["main", "mfu=high"], "mfu"),
    (["main", "--dry-run"], "--dry-run"), (["seed=1"], "study"),
])
def test_cli_bad_study_scale_or_flag_is_one_line_and_exit_2(argv, field, capsys):
    assert command.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"error: {field}: ") and captured.err.count("\n") == 1


def test_a_gpu_study_on_a_cpu_machine_stops_in_one_line_before_any_job(tmp_path, capsys):
    """`fixedcode sweep gpu_quick` on a CPU box: one error line naming the first job, exit 2, no job
    started (it printed one failure per job, after each had started, and exited 1)."""
    if __import__("torch").cuda.is_available():
        pytest.skip("this machine has the GPU the study asks for")
    assert command.main(["gpu_quick", "seed=1", "input=learned", f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: trainer.accelerator: gpu asks for a CUDA GPU") and err.count("\n") == 1, err
    assert "(in job experiment=gpu_quick,input=learned,seed=1)" in err
    assert not (tmp_path / "multirun").exists()


def test_two_grids_launching_the_same_job_stop_the_study(tmp_path):
    path = tmp_path / "overlap.yaml"
    path.write_text("name: overlap\ndescription: d\njobs: {cpu: 2, paper: 2}\n"
                    "grids:\n  - {input: [learned, gf2], seed: 1}\n  - {input: gf2, seed: 1}\n")
    with pytest.raises(ConfigError, match=r"overlap.grids: two grids launch the same job input=gf2,model=test_micro,seed=1;"):
        command.plan(studies.load_study(str(path)), "cpu", ["model=test_micro"])


def test_format_value_keeps_strings_strings():
    assert studies.format_value("01") == "'01'" and studies.format_value("true") == "'true'"
    assert studies.format_value(True) == "true" and studies.format_value(0.1) == "0.1"
    assert studies.format_value("match_init") == "match_init" and studies.format_value(None) == "null"


@pytest.mark.slow
def test_controls_study_end_to_end_tiny(tmp_path, monkeypatch):
    """Every control variant really trains through the launcher -> run -m -> Lightning, lands in one
    study directory, records its properties, is readable by analysis, and a re-run skips it.

    `fixedcode sweep` runs in this process (helpers.cli: its exit code and terminal, as a subprocess
    gives them); each grid's `run -m` is a process of its own, as always. The jobs validate on the
    small held-out split the test suite shares (helpers.SMALL_VAL), in the session's token cache."""
    monkeypatch.setenv("FIXEDCODE_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    extra = ["seed=1", "model=test_micro", "logger=csv", "train.tokens=2048", "train.batch_size=4",
             "train.val_points=2", "train.log_every=2", "train.val_batch_size=128", SMALL_VAL]
    proc = fixedcode(["sweep", "controls", *extra])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study_dir = tmp_path / "out" / "multirun" / "controls"
    results = {p.parent.name: json.loads(p.read_text()) for p in study_dir.glob("*/results.json")}
    inputs = studies.load_study("controls").grids[0]["input"]
    planned = command.plan(studies.load_study("controls"), "cpu", extra)
    assert set(results) == keys(planned) and len(results) == len(inputs)
    by_input = {r["input"]: r for r in results.values()}
    for name, r in by_input.items():
        assert r["status"] == "completed" and r["sweep"] == "controls", (name, r.get("error"))
        assert r["tokens_seen"] >= (1024 if name.endswith("_isoflop") else 2048)  # isoflop: ~0.75x the budget
    assert by_input["frozen_learned"]["params"]["input_trainable"] == 0
    assert by_input["frozen_learned"]["input_props"]["trainable"] is False
    assert by_input["learned_lowdim"]["params"]["input_trainable"] == 512 * 16
    assert by_input["gaussian16"]["input_props"]["storage"] == "buffer"
    assert by_input["binary16_permuted"]["input_props"]["permutation_seed"] == 0
    isoflop = by_input["binary16_sizematched_isoflop"]
    assert isoflop["tokens_seen"] < by_input["binary16_sizematched"]["tokens_seen"]
    matched = by_input["binary16_sizematched"]
    assert abs(matched["params"]["trainable"] / by_input["learned"]["params"]["trainable"] - 1) <= 0.01
    assert matched["input_props"]["size_match_d_ff"] > matched["input_props"]["size_match_base_d_ff"]

    from fixedcode_study.analysis.read.runs import load_run_dirs

    loaded = load_run_dirs([study_dir])
    assert set(loaded.jobs["input"]) == set(inputs) and loaded.jobs["included"].all()

    again = fixedcode(["sweep", "controls", *extra])
    assert again.returncode == 0 and "every job is already completed under these settings" in again.stdout
    assert "[HYDRA] Launching" not in again.stdout + again.stderr  # nothing left to launch, so nothing launched
    assert {p.parent.name: json.loads(p.read_text()) for p in study_dir.glob("*/results.json")} == results


@pytest.mark.slow
def test_a_resumed_study_says_what_is_done_and_times_the_rest_from_its_own_jobs(tmp_path, monkeypatch, capsys):
    """One job of a two-job study really trains (run -m, Lightning); the dry run then finds it
    completed under today's settings, times the other from its recorded speed, and a record from
    other settings is called stale with its difference, as `run` would refuse it."""
    study_file = tmp_path / "tiny.yaml"
    study_file.write_text("name: tiny\ndescription: two budgets of one arm\njobs: {cpu: 2, paper: 2}\n"
                          "grids:\n  - train.tokens: [2048, 4096]\n    input: binary16\n")
    # the small held-out split the suite shares (helpers.SMALL_VAL), in the session's token cache; no more
    # overrides, so that the job keys stay readable (under the 120 characters config.job_key spells out)
    extra = ["model=test_micro", "logger=csv", "train.batch_size=4", "train.val_points=1", "seed=1", SMALL_VAL]
    monkeypatch.setenv("FIXEDCODE_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    proc = fixedcode(["sweep", str(study_file), "train.tokens=2048", *extra])  # in this process; run -m is its own
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert command.main([str(study_file), "dry_run=true", *extra]) == 0
    out = capsys.readouterr().out
    assert "on disk: 1 of 2 jobs completed under these settings (a launch skips them)" in out
    assert out.count("[completed]") == 1 and "train.tokens=2048" in out.split("[completed]")[0].splitlines()[-1]
    (done,) = (tmp_path / "out" / "multirun" / "tiny").glob("*train.tokens=2048*/results.json")
    record = json.loads(done.read_text())
    speed = record["tokens_seen"] / record["train_seconds"]
    assert f"left: 1 job: 1 at the speed 1 completed job(s) of the same model and training settings ran " \
           f"(median {speed:,.0f} tokens/s a job)" in out

    # The same job directory holding weights from other settings: the launch would refuse it.
    record["fingerprint"]["sha"] = "0" * 64
    record["fingerprint"]["settings"]["optim.lr"] = 1.0
    done.write_text(json.dumps(record))
    assert command.main([str(study_file), "dry_run=true", *extra]) == 0
    out = capsys.readouterr().out
    assert "0 of 2 jobs completed" in out and "1 trained under other settings (a launch refuses them" in out
    assert "optim.lr: 1.0 -> " in out and "[stale]" in out
    assert "2 with no such completed job, at 300 GFLOP/s" in out
