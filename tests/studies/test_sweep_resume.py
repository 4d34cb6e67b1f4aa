"""Re-running a sweep is idempotent: completed jobs are skipped untouched, missing ones run, and a
failing job neither stops nor damages the others while the exit status and summary name it (a bad
setting is refused before its job directory holds a record).

hydra/launcher=basic, in this process (helpers.cli): what is tested is the re-run, not the launcher
(test_launcher runs the parallel one and checks it names and summarises the jobs alike).
"""

from __future__ import annotations

from helpers.cli import run_cli
from helpers.distributed import results

SMALL = ["model=test_micro", "logger=csv", "train.tokens=4096", "train.batch_size=8", "train.val_points=1",
         "train.log_every=2", "train.val_batch_size=256", "name=resweep"]


def cli(args: list[str], cwd):
    return run_cli([*args, "hydra/launcher=basic"], cwd=cwd)


def files_and_mtimes(job):
    # .hydra/ is Hydra's own record of the latest launch, rewritten before any job code runs; .lock
    # is taken (and stamped with the holder) before the completed check, which happens under it
    return {str(p.relative_to(job)): p.stat().st_mtime_ns for p in job.rglob("*")
            if p.is_file() and ".hydra" not in p.parts and p.name != ".lock"}


def test_rerun_of_partial_sweep_runs_exactly_the_missing_jobs(tmp_path):
    sweep_dir = tmp_path / "multirun" / "resweep"
    first = cli(["-m", "train.global_batch_tokens=512", *SMALL, f"out_root={tmp_path}"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (done,) = [p for p in sweep_dir.iterdir() if p.is_dir()]
    before = files_and_mtimes(done)
    first_record = results(done)

    # 512 is complete; 1000 is not a multiple of 8 x 64 (fails); 1024 is missing.
    again = cli(["-m", "train.global_batch_tokens=512,1000,1024", *SMALL, f"out_root={tmp_path}"], cwd=tmp_path)
    assert again.returncode == 1, again.stderr[-3000:]
    jobs = {results(p)["overrides"][0]: p for p in sweep_dir.iterdir() if (p / "results.json").exists()}
    # the bad setting is refused before its job directory gets a record (bad input loses nothing)
    assert set(jobs) == {f"train.global_batch_tokens={n}" for n in (512, 1024)}

    # the completed job was skipped: none of its files rewritten
    assert files_and_mtimes(done) == before
    assert results(done) == first_record
    # the missing job ran to completion despite the failure before it
    ran = results(jobs["train.global_batch_tokens=1024"])
    assert ran["status"] == "completed" and ran["steps"] == 4 and ran["plan"]["grad_accum"] == 2
    assert "train.global_batch_tokens: 1000 is not a positive multiple" in again.stderr
    assert "1 job(s) were already complete and skipped" in again.stdout
    assert "summary: 1 trained, 1 skipped as complete, 1 failed" in again.stdout
    assert "train.global_batch_tokens=1000" in again.stderr.split("job(s) failed:")[-1]

