"""Checkpoints and resume: a killed run continues bit for bit; SIGTERM saves and exits non-zero.

The kills hit a real process (helpers.distributed.start); the re-run that resumes runs in this
process (helpers.cli), as the same command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch
from helpers.cli import run_cli
from helpers.distributed import (
    TINY,
    metric_rows,
    only_job,
    reference_run,
    results,
    start,
    stop,
    wait_for,
)

CKPT = ["checkpoint.every_steps=4", "checkpoint.keep_every_steps=12"]


def test_sigkill_then_rerun_resumes_to_identical_metrics(tmp_path, tmp_path_factory):
    reference = reference_run(tmp_path_factory)
    args = [*TINY, *CKPT, f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "attempt1.log")
    wait_for("**/checkpoints/step-0000012.ckpt", tmp_path, proc)
    assert stop(proc, signal.SIGKILL) == -signal.SIGKILL
    job = only_job(tmp_path)
    assert results(job)["status"] == "running"  # killed for real, mid-training
    last = torch.load(job / "checkpoints" / "last.ckpt", weights_only=True)  # no pickled objects
    killed_at = last["global_step"]
    assert killed_at >= 12 and last["fixedcode_resume"]["rng"], "RNG states missing from the checkpoint"
    assert (job / "checkpoints" / ".step-0000012.ckpt.tmp").exists() is False

    rerun = run_cli(args, cwd=tmp_path)  # the same command again
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    res, ref = results(job), results(reference)
    assert res["status"] == "completed" and res["attempts"] == 2 and res["resumed_from_step"] == killed_at
    assert res["final"] == ref["final"] and res["steps"] == ref["steps"] == 32
    assert res["tokens_seen"] == ref["tokens_seen"] and res["train_seconds"] > 0
    # per-step losses bitwise equal, and each (step, metric) logged exactly once despite the kill
    assert metric_rows(job) == metric_rows(reference)
    steps_metrics = [(r[0], r[2]) for r in metric_rows(job, skip=())]
    assert len(steps_metrics) == len(set(steps_metrics))
    assert not (job / "checkpoints" / "last.ckpt").exists()  # resume state dropped once complete


@pytest.mark.slow  # the same run, signal and checks as test_trust's test_checkpoint_of_other_settings_is_never_resumed
def test_sigterm_saves_a_checkpoint_and_exits_nonzero(tmp_path):
    args = [*TINY, "checkpoint.every_steps=0", "checkpoint.keep_every_steps=4", f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "run.log")
    wait_for("**/checkpoints/step-0000004.ckpt", tmp_path, proc)
    code = stop(proc, signal.SIGTERM)
    log = (tmp_path / "run.log").read_text()
    assert code == 143, log[-3000:]
    job = only_job(tmp_path)
    ckpt = torch.load(job / "checkpoints" / "last.ckpt", weights_only=True)
    assert 4 <= ckpt["global_step"] < 32
    res = results(job)
    assert res["status"] == "preempted" and "SIGTERM" in res["error"]
    assert "re-run to resume" in log


POOL_UNDER_JOB_HANDLERS = """
import faulthandler, multiprocessing as mp, signal, sys, time
# A hang shows where it waits: every thread's stack on stderr, and exit, before the test's own timeout.
faulthandler.dump_traceback_later(100, exit=True)
started = time.perf_counter()
from fixedcode_study.training.resume import PreemptionGuard, ResumableCheckpoint
imported = time.perf_counter()

def square(x):
    return x * x

loop = ResumableCheckpoint.__new__(ResumableCheckpoint)  # only its signal handling is exercised
loop.signals, loop._preempt_signum = [signal.SIGTERM], None
with PreemptionGuard() as guard:
    for handler in (guard._raise, loop._on_signal):  # outside and inside the training loop
        loop._pid = guard._pid
        signal.signal(signal.SIGTERM, handler)
        for _ in range(4):  # Pool.__exit__ SIGTERMs its workers, as lm-eval's bootstrap pool does
            with mp.get_context("fork").Pool(2) as pool:
                assert pool.map(square, range(64)) == [x * x for x in range(64)]
print(f"pools finished (import {imported - started:.1f} s, pools {time.perf_counter() - imported:.1f} s)")
"""


@pytest.mark.slow  # hung in 2 of ~6 fresh-clone CI runs under xdist (never in 825 cycles outside pytest);
# the cause is open, so it runs with -m slow, and the deterministic test below stays in the default suite
def test_a_forked_worker_ends_on_sigterm_instead_of_running_the_jobs_handler():
    # lm-eval's bootstrap stderr forks a Pool inside the job; Pool.terminate() stops workers with
    # SIGTERM. A worker that ran the job's flag-only handler kept waiting, and the job hung in join().
    try:
        done = subprocess.run([sys.executable, "-c", POOL_UNDER_JOB_HANDLERS], capture_output=True, text=True,
                              timeout=120)  # on timeout subprocess.run SIGKILLs it: SIGTERM would be absorbed
    except subprocess.TimeoutExpired as hung:  # the script's stack dump at 100 s, which the pipes held back
        stderr = hung.stderr.decode(errors="replace") if isinstance(hung.stderr, bytes) else (hung.stderr or "")
        pytest.fail("the pool script hung; its threads at 100 s:\n" + stderr[-6000:])
    assert done.returncode == 0 and "pools finished" in done.stdout, done.stdout + done.stderr[-4000:]


def test_a_forked_child_gets_the_default_action_for_every_preemption_signal():
    # The deterministic half of the test above: right after os.fork the child holds SIG_DFL, so the
    # kernel ends it on SIGTERM even while it waits in C, where no Python handler would ever run.
    from fixedcode_study.training.resume import PREEMPT_SIGNALS, PreemptionGuard, ResumableCheckpoint

    loop = ResumableCheckpoint.__new__(ResumableCheckpoint)
    loop.signals, loop._preempt_signum = [signal.SIGUSR1], None
    with PreemptionGuard() as guard:
        loop._pid = guard._pid
        signal.signal(signal.SIGUSR1, loop._on_signal)  # inside the loop: the flag-only handler
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it inherited, then leave without running pytest's exit
            os.close(read)
            inherited = [signal.getsignal(getattr(signal, s)) == signal.SIG_DFL for s in PREEMPT_SIGNALS]
            os.write(write, bytes(inherited))
            os._exit(0)
        os.close(write)
        reported = os.read(read, 16)
        os.waitpid(pid, 0)
        assert signal.getsignal(signal.SIGTERM) == guard._raise  # the job's own process keeps its handlers
        assert signal.getsignal(signal.SIGUSR1) == loop._on_signal
    assert list(reported) == [1] * len(PREEMPT_SIGNALS)
