"""One compile at a time on this machine: compiled jobs take turns at the steps that compile.

A compiled job compiles (or, with a warm cache, loads) its graphs at three moments: its first
training step (forward and backward), its first validation, and a validation that reads a new
number of batches (the final one reads the whole held-out split, whose last batch is smaller). When
jobs run side by side (hydra/launcher=parallel), the jobs of the first round all start cold at the
same moment and compile the same graphs at once, each on its share of the cores, and none can use
what another compiles. Taking turns, one job compiles with every core inductor's compile workers
can get while the others wait, then they load its kernels from inductor's on-disk cache: measured
in docs/measurements.md (the first command).

The turn is an flock (turns.py) on one file in inductor's cache folder (TORCHINDUCTOR_CACHE_DIR), so it is shared
by exactly the jobs that share that cache, in any process; the kernel releases it when its holder
exits, also when it is killed. It only orders work in time: no number changes. A filesystem without
flock compiles unserialised, as before. Only a job of one process takes turns (training/procedure.py):
a rank of a multi-process job waiting for the turn would hold up its peers' collectives.

A warm cache needs no turn: loading compiled kernels takes seconds, and waiting on each other would
cost the warm run what taking turns saves a cold one. So a job that finished one of those moments
leaves a marker beside the lock, named by what decides the graphs it compiled (`graph_key`: the
model as built, batch shape, precision, threads, torch's version) and the moment; a later job with
the same key passes that moment without the turn. A key that is too coarse or too fine costs time,
never a number: the turn decides only who waits.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import IO, Any

import lightning as L

from ..turns import give_turn, take_turn

__all__ = ["CompileTurns", "graph_key", "turn_lock_path"]

log = logging.getLogger(__name__)

LOCK_NAME = "fixedcode-compile-turn"  # an flock file (not named .lock: that is a job directory's)


def turn_lock_path() -> Path:
    """The turn's lock file: in the inductor cache folder this process compiles into."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / LOCK_NAME


def graph_key(spec: Any) -> str:
    """What decides the graphs a job compiles (spec.JobSpec): its model as built (input, head and
    architecture), batch shapes, precision, threads and torch's version; not its seed or data."""
    import torch

    model = spec.to_json()["model"]
    decides = {"model": model, "micro_batch": spec.plan.micro_batch, "seq_len": spec.plan.seq_len,
               "val_batch_size": spec.train.val_batch_size, "precision": spec.runtime.precision,
               "threads": spec.runtime.threads, "per_block": spec.runtime.compile_per_block, "torch": torch.__version__}
    return hashlib.sha256(json.dumps(decides, sort_keys=True, default=str).encode()).hexdigest()[:16]


class CompileTurns(L.Callback):
    """Hold the compile turn over a fit's first training step and over every validation whose
    batch count this fit has not validated before, unless a job of the same `graph_key` has
    passed that moment with this cache before (module docstring)."""

    def __init__(self, key: str, path: Path | None = None) -> None:
        self.key, self.path = key, path
        self._held: IO[Any] | None = None
        self._moment: str | None = None  # the moment the turn is held for, marked when it ends well
        self._trained = False
        self._validated: set[str] = set()
        self.waited = 0.0  # seconds this job waited for another job's turn

    # -- the turn -----------------------------------------------------------------------------------
    def _marker(self, moment: str) -> Path:
        return (self.path or turn_lock_path()).parent / f"fixedcode-compiled-{self.key}-{moment}"

    def _take(self, moment: str, what: str) -> None:
        if self._held is not None:
            return
        path = self.path or turn_lock_path()
        if self._marker(moment).exists():
            return  # compiled in this cache before: loading needs no turn
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(path, "a+")
        except OSError:
            return
        try:
            waited = take_turn(fh, lambda: log.info("waiting for another job's compile before the %s (the turn: %s)",
                                                    what, path))
        except BaseException:  # a preemption signal while waiting: nothing held
            fh.close()
            raise
        if waited is None:  # no flock on this filesystem: compile unserialised
            fh.close()
            return
        if waited:
            self.waited += waited
            log.info("waited %.1f s for another job's compile before the %s", waited, what)
        self._held, self._moment = fh, moment

    def _give(self, done: bool = True) -> None:
        fh, moment, self._held, self._moment = self._held, self._moment, None, None
        if fh is not None:
            if done and moment is not None:
                try:
                    self._marker(moment).touch()
                except OSError:
                    pass
            try:
                give_turn(fh)
            finally:
                fh.close()

    # -- when it is held ----------------------------------------------------------------------------
    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if not self._trained:
            self._take("train", "first training step")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._trained = True
        self._give()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        batches = "-".join(str(n) for n in trainer.num_val_batches)  # per loader (inf: no length)
        if batches not in self._validated:
            self._validated.add(batches)
            self._take(f"validate-{batches}", "first validation of this length")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._give()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._give(done=False)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._give(done=False)
