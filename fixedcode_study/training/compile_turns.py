"""One compile at a time on this machine: compiled jobs take turns at the steps that compile.

A compiled job compiles (or, with a warm cache, loads) its graphs at three moments: its first
training step (forward and backward), its first validation, and a validation that reads a new
number of batches (the final one reads the whole held-out split, whose last batch is smaller). When
jobs run side by side (hydra/launcher=parallel), the jobs of the first round all start cold at the
same moment and compile the same graphs at once, each on its share of the cores, and none can use
what another compiles. Taking turns, one job compiles with every core inductor's compile workers
can get while the others wait, then they load its kernels from inductor's on-disk cache: measured
in docs/measurements.md (the first command).

The turn is an flock on one file in inductor's cache folder (TORCHINDUCTOR_CACHE_DIR), so it is shared
by exactly the jobs that share that cache, in any process; the kernel releases it when its holder
exits, also when it is killed. It only orders work in time: no number changes. A filesystem without
flock compiles unserialised, as before.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import IO, Any

import lightning as L

__all__ = ["CompileTurns", "turn_lock_path"]

log = logging.getLogger(__name__)

LOCK_NAME = "fixedcode-compile.lock"


def turn_lock_path() -> Path:
    """The turn's lock file: in the inductor cache folder this process compiles into."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / LOCK_NAME


class CompileTurns(L.Callback):
    """Hold the compile turn over a fit's first training step and over every validation whose
    batch count this fit has not validated before (module docstring)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._held: IO[Any] | None = None
        self._trained = False
        self._validated: set[tuple[int, ...]] = set()
        self.waited = 0.0  # seconds this job waited for another job's turn

    # -- the turn -----------------------------------------------------------------------------------
    def _take(self, what: str) -> None:
        import fcntl

        if self._held is not None:
            return
        path = self.path or turn_lock_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(path, "a+")
        except OSError:
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            t0 = time.perf_counter()
            try:
                fcntl.flock(fh, fcntl.LOCK_EX)
            except BaseException:  # a preemption signal while waiting: nothing held
                fh.close()
                raise
            waited = time.perf_counter() - t0
            self.waited += waited
            log.info("waited %.1f s for another job's compile before the %s", waited, what)
        except OSError:  # no flock on this filesystem: compile unserialised
            fh.close()
            return
        self._held = fh

    def _give(self) -> None:
        import fcntl

        fh, self._held = self._held, None
        if fh is not None:
            try:
                fcntl.flock(fh, fcntl.LOCK_UN)
            finally:
                fh.close()

    # -- when it is held ----------------------------------------------------------------------------
    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if not self._trained:
            self._take("first training step")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._trained = True
        self._give()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        batches = tuple(int(n) for n in trainer.num_val_batches)
        if batches not in self._validated:
            self._validated.add(batches)
            self._take("first validation of this length")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._give()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._give()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._give()
