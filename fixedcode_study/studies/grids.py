"""Running a study: each grid as its own `python -m fixedcode_study.run -m name=<study> ...` process.

Each grid's command is printed before it starts, so any grid can be re-run by hand. Jobs that
already completed are skipped by the run app itself, so an interrupted study is resumed by running
the same command again. The grids inherit this process's environment (FIXEDCODE_VERBOSE from -v).

A preemption stops the study: a grid that exits 143 (its job saved a checkpoint and recorded
`preempted`), or a preemption signal sent to this launcher (forwarded to the running grid, which
then stops the same way), ends the sweep with `Outcome.preempted`, which the command turns into
exit status 143, so a scheduler requeues the same command and every job resumes where it stopped.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..training.resume import PREEMPT_EXIT_CODE
from .study import Study, launch_overrides

__all__ = ["Outcome", "run_grids"]

FORWARDED_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")  # = training.resume's preemption signals


@dataclass(frozen=True)
class Outcome:
    failed: int = 0          # grids that reported failed jobs
    preempted: bool = False  # the study stopped for a preemption; re-running the command resumes it


def run_grids(study: Study, scale: str, extra: Sequence[str]) -> Outcome:
    """Launch every grid as its own `run -m` process, one after another."""
    failed = 0
    child: subprocess.Popen | None = None
    stop: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        stop.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    prior = {getattr(signal, n): signal.getsignal(getattr(signal, n))
             for n in FORWARDED_SIGNALS if hasattr(signal, n)}
    for signum in prior:
        signal.signal(signum, forward)
    try:
        for grid in launch_overrides(study, scale, list(extra)):
            if stop:
                break
            cmd = [sys.executable, "-m", "fixedcode_study.run", "-m", *grid]
            print("[sweep] $ python -m fixedcode_study.run -m " + " ".join(grid), flush=True)
            child = subprocess.Popen(cmd)
            if stop:  # a signal that came between the check above and the launch
                child.send_signal(stop[-1])
            code = child.wait()
            # 143 from the job's own handler; -N when the signal's default action killed the grid
            # (between jobs of -m, or before the job installed its handler)
            if code == PREEMPT_EXIT_CODE or -code in prior or stop:
                print(f"[sweep] {study.name}: preempted; re-run the same command to resume",
                      file=sys.stderr, flush=True)
                return Outcome(failed, preempted=True)
            if code != 0:
                failed += 1
    finally:
        for signum, handler in prior.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    return Outcome(failed)
