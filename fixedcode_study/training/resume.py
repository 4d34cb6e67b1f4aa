"""Resumable training: atomic Lightning checkpoints, RNG/data position, preemption, metric trimming.

Where they go is the job directory's business (record/jobdir.py: last.ckpt, which re-running the
job resumes from, and step-XXXXXXX.ckpt snapshots every `checkpoint.keep_every_steps` steps).
Every file is written to a temporary name and renamed into place (record/atomic.py), so a kill
during a save leaves the previous checkpoint intact. A save that fails (a full disk, a quota, any
error) removes its temporary file before the error goes on, and one that found no room raises
errors.WriteFailed naming the checkpoint (the job records it as one line, training/job.py).

Checkpoints are taken *between* optimizer steps (at the first micro-batch of the next step, after
that step's logging and validation), so a resumed run replays nothing and skips nothing. Besides
Lightning's own state (weights, optimizer, LR schedule, loop counters) a checkpoint holds what a
bitwise-identical continuation needs, all as tensors/lists (loadable with weights_only=True): the
next micro-step of the data order, the torch/CUDA/numpy/python RNG states of every rank, and the
task's host-side counters (LanguageModelTask.on_save_checkpoint).

Preemption: inside the training loop SIGTERM (and SIGUSR1/SIGUSR2, which SLURM/submitit send
before a time limit) only set a flag; at the next step boundary every rank agrees, last.ckpt is
written and `Preempted` is raised. In every other phase of a job (data preparation, trainer setup,
final validation, saving the final weights, evaluation) `PreemptionGuard` raises `Preempted` at
once: everything those phases write is atomic, so stopping anywhere loses only work in progress.
Either way the job records status `preempted`, then calls any handler installed before the job
(e.g. submitit's requeue) and exits with status 143.

Every checkpoint carries the job's fingerprint (record/fingerprint.py), so a re-run under other
settings never resumes it silently (`checkpoint_fingerprint`), and its resolved spec
(spec.JobSpec.to_text, `checkpoint_spec`): what the weights in it were trained under, whatever
conf/ says later.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from ..record import atomic
from ..record.jobdir import JobDir

PREEMPT_EXIT_CODE = 143  # 128 + SIGTERM: what schedulers expect from a job stopped by a signal
PREEMPT_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")
STATE_KEY = "fixedcode_resume"


class Preempted(SystemExit):
    """Raised after the preemption checkpoint is written; exits the process with status 143.

    A SystemExit (not an Exception) on purpose: a sweep must stop here rather than treat the job
    as a failure and start the next one on an allocation that is going away.
    """

    def __init__(self, step: int | None, signum: int):
        super().__init__(PREEMPT_EXIT_CODE)
        self.step, self.signum = step, signum

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.step is None:
            return f"preempted by {name} outside the training loop; re-run to resume from the last checkpoint"
        return f"preempted by {name} at step {self.step}; checkpoint saved, re-run to resume"


def _is_ours(handler: Any) -> bool:
    return isinstance(getattr(handler, "__self__", None), (PreemptionGuard, ResumableCheckpoint))


_fork_masks: dict[int, Any] = {}  # forking thread -> its signal mask before the fork


def _hold_preemption_across_fork() -> None:
    """Before os.fork: block, in the forking thread, the preemption signals that run a Python
    handler here. A signal that reaches the child before CPython has reset its signal state after
    fork (a Pool that is terminated before a slow-to-start worker ever ran) trips the C-level flag
    of the inherited handler, and CPython then clears that flag (_PySignal_AfterFork, bpo-9535): the
    signal is lost, the worker stays alive and Pool.terminate() waits for it forever. Blocked, the
    signal waits in the kernel until the child holds its own disposition (below)."""
    held = [s for s in (getattr(signal, n, None) for n in PREEMPT_SIGNALS)
            if s is not None and callable(signal.getsignal(s))]
    if held and hasattr(signal, "pthread_sigmask"):
        _fork_masks[threading.get_ident()] = signal.pthread_sigmask(signal.SIG_BLOCK, held)


def _release_in_parent() -> None:
    mask = _fork_masks.pop(threading.get_ident(), None)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that came meanwhile is handled now


def _default_preemption_in_child() -> None:
    """A process forked from the job (lm-eval's bootstrap Pool, a fork-started DataLoader worker)
    inherits the job's Python signal handlers. There a preemption signal must do what it would do
    without us: end the process, and at once. multiprocessing.Pool.terminate() stops its workers
    with SIGTERM and then joins them; a Python-level handler only runs when the worker's interpreter
    gets to it, and a worker waiting in C (a lock, a semaphore) never did, so the job hung in join().
    With the default action restored in the child right after fork, the kernel ends it; a signal
    sent before that point was held blocked (_hold_preemption_across_fork) and ends it on unblocking."""
    mask = _fork_masks.pop(threading.get_ident(), None)  # the forking thread is the child's only one
    _fork_masks.clear()
    for name in PREEMPT_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None and _is_ours(signal.getsignal(signum)):
            signal.signal(signum, signal.SIG_DFL)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_hold_preemption_across_fork, after_in_parent=_release_in_parent,
                        after_in_child=_default_preemption_in_child)


def in_forked_child(owner_pid: int, signum: int) -> bool:
    """The same rule for a child made by a fork that bypassed os.fork (a C library's own fork):
    the handler itself restores the default action and re-sends the signal to this process.
    Returns True when this is not the job's own process."""
    if os.getpid() == owner_pid:
        return False
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return True


class PreemptionGuard:
    """Turns the preemption signals into `Preempted` for the whole life of a job.

    Outside the training loop the handler raises at once. Inside it, ResumableCheckpoint swaps in
    its own flag-only handler (a checkpoint must be taken at a step boundary) and Lightning restores
    this one after fit. `prior` keeps what was installed before the job (a launcher's requeue
    handler); `chain` calls it once the record says `preempted`.
    """

    def __init__(self, signals: tuple[str, ...] = PREEMPT_SIGNALS):
        self.signals = [getattr(signal, s) for s in signals if hasattr(signal, s)]
        self.prior: dict[int, Any] = {}
        self._installed = False
        self.fired = False
        self._pid = os.getpid()

    def __enter__(self) -> "PreemptionGuard":
        import threading

        if threading.current_thread() is threading.main_thread():  # signals can only be set there
            self._pid = os.getpid()
            self.prior = {s: signal.getsignal(s) for s in self.signals}
            for s in self.signals:
                signal.signal(s, self._raise)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            for s, handler in self.prior.items():
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
            self._installed = False

    def _raise(self, signum: int, frame: Any) -> None:
        # Once: a second signal (a scheduler's own plus the one a sweep launcher forwards) must not
        # interrupt the writing of the `preempted` record the first one started.
        if in_forked_child(self._pid, signum):
            return
        if self.fired:
            return
        self.fired = True
        raise Preempted(None, signum)

    def chain(self, signum: int) -> None:
        """Call the handler that was there before the job (e.g. submitit's requeue), if any."""
        prior = self.prior.get(signum)
        if callable(prior):
            prior(signum, None)


FINGERPRINT_KEY = "fixedcode_fingerprint"
SPEC_KEY = "fixedcode_spec"  # the job's resolved spec as JSON text (a str: loadable with weights_only=True)


def _load_light(path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint's top-level dict without reading the tensors (mmap). Sharded FSDP checkpoints
    are folders: their metadata lives in `meta.pt` beside the shards."""
    path = Path(path)
    if path.is_dir():
        path = path / "meta.pt"
    return torch.load(path, map_location="cpu", weights_only=True, mmap=path.suffix != ".pt")


def checkpoint_step(path: str | os.PathLike) -> int:
    return int(_load_light(path)["global_step"])


def checkpoint_fingerprint(path: str | os.PathLike) -> dict[str, Any] | None:
    """The fingerprint a checkpoint was trained under (None: written before fingerprints existed)."""
    return _load_light(path).get(FINGERPRINT_KEY)


def checkpoint_spec(path: str | os.PathLike) -> dict[str, Any] | None:
    """The resolved spec (spec.JobSpec.to_json) a checkpoint was trained under (None: written before
    checkpoints stored it)."""
    text = _load_light(path).get(SPEC_KEY)
    return None if text is None else json.loads(text)


def trim_metrics(csv_path: str | os.PathLike, after_step: int) -> int:
    """Drop metrics.csv rows logged after `after_step` (by the attempt that was killed).

    The resumed run logs those steps again (identically on CPU), so the file keeps exactly one row
    per (step, metric). A torn last line from a kill mid-write is dropped too. Rewritten atomically.
    Returns the number of rows dropped.
    """
    path = Path(csv_path)
    if not path.exists():
        return 0
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return 0
    header, body = rows[0], rows[1:]
    kept = []
    for row in body:
        try:
            if len(row) == len(header) and int(row[0]) <= after_step:
                float(row[3])  # a torn value fails here
                kept.append(row)
        except ValueError:
            pass
    dropped = len(body) - len(kept)
    if dropped:
        with atomic.atomic_file(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(kept)
    return dropped


# -- RNG state as tensors / lists (numpy arrays would break weights_only=True loading) -----------
def rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else [],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
        "python": [version, list(internal), gauss_next],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


class DirectCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer without its detour through the system temp folder.

    TorchCheckpointIO saves through an fsspec transaction, which writes the whole file to
    tempfile.mkstemp()'s folder (/tmp) and then copies it across filesystems to the path: on a full
    job disk the copy fails half-way (a partial file beside last.ckpt, an orphan in /tmp). Here the
    checkpoint is serialized in memory as Lightning does and written straight to the path
    `ResumableCheckpoint.save` gives, which is already a temporary name; closing the file inside
    makes a failed write raise here, with its errno. Loading is Lightning's.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            return super().save_checkpoint(checkpoint, path, storage_options)
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(buffer.getbuffer())


class ResumableCheckpoint(L.Callback):
    """Writes last.ckpt every `every_steps` optimizer steps and on preemption; restores the rest.

    `keep_every_steps` > 0 additionally keeps step-XXXXXXX.ckpt snapshots at those steps.
    `fingerprint` and `spec` (the job's resolved spec as JSON text) go into every checkpoint. `after_save(step)` runs on rank 0 once last.ckpt is
    in place (the W&B mirror sends the curves the checkpoint now covers).
    """

    def __init__(self, job: JobDir, every_steps: int, grad_accum: int,
                 keep_every_steps: int = 0, preempt_signals: tuple[str, ...] = PREEMPT_SIGNALS,
                 fingerprint: dict[str, Any] | None = None, spec: str | None = None, after_save: Any = None):
        self.job = job
        self.fingerprint, self.spec, self.after_save = fingerprint, spec, after_save
        self.every_steps, self.keep_every_steps, self.grad_accum = every_steps, keep_every_steps, grad_accum
        self.signals = [getattr(signal, s) for s in preempt_signals if hasattr(signal, s)]
        self.last_saved_step = -1
        self.resume_history: list[int] = []  # steps this run was resumed from, oldest first
        self._preempt_signum: int | None = None
        self._pid = os.getpid()
        self._pending_rng: dict[str, Any] | None = None  # restored at the first step, after setup's draws
        self._rng_for_save: list[dict[str, Any]] | None = None

    # -- preemption ----------------------------------------------------------------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Replace Lightning's SIGTERM handler, which stops mid-accumulation and saves nothing.
        import threading

        if threading.current_thread() is threading.main_thread():
            self._pid = os.getpid()
            for s in self.signals:
                signal.signal(s, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if in_forked_child(self._pid, signum):
            return
        self._preempt_signum = signum

    @property
    def preempt_signum(self) -> int | None:
        """A signal that arrived inside the loop but after its last step boundary (fit ended first)."""
        return self._preempt_signum

    # -- saving ----------------------------------------------------------------------------------
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Only Lightning's default writer is replaced: a writer the trainer config chose stays.
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
            trainer.strategy.checkpoint_io = DirectCheckpointIO()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int) -> None:
        if batch_idx % self.grad_accum:
            return  # inside an accumulation window: accumulated gradients are not checkpointed
        if self._pending_rng is not None:
            set_rng_state(self._pending_rng)
            self._pending_rng = None
        step = trainer.global_step
        preempt = trainer.strategy.reduce_boolean_decision(self._preempt_signum is not None, all=False)
        if preempt:
            self.save(trainer, self.job.last_checkpoint)
            # The job records `preempted` and then calls the launcher's handler (PreemptionGuard).
            raise Preempted(step, self._preempt_signum or signal.SIGTERM)
        if step > 0 and step != self.last_saved_step:
            if self.every_steps and step % self.every_steps == 0:
                self.save(trainer, self.job.last_checkpoint)
            if self.keep_every_steps and step % self.keep_every_steps == 0:
                self.save(trainer, self.job.snapshot(step))
            self.last_saved_step = step

    def save(self, trainer: L.Trainer, path: Path) -> None:
        """Collective: every rank calls it; the strategy decides who writes (rank 0 unless sharded)."""
        self._rng_for_save = self._gather_rng(trainer)
        tmp = JobDir.partial(path)
        if trainer.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.discard(tmp)  # a save cut short by a kill: its room is needed for this one
        trainer.strategy.barrier("checkpoint_tmp")
        try:
            trainer.save_checkpoint(tmp, weights_only=False)
            trainer.strategy.barrier("checkpoint_written")
            if trainer.is_global_zero:
                atomic.place(tmp, path)
        except BaseException as err:
            # The previous checkpoint is untouched; the partial one goes, or a full disk stays full
            # (and the job could not even record that it failed).
            if trainer.is_global_zero:
                atomic.discard(tmp)
            failed = atomic.named(err, path)
            if failed is not err:
                raise failed from err
            raise
        finally:
            self._rng_for_save = None
        trainer.strategy.barrier("checkpoint_placed")
        if trainer.is_global_zero and path == self.job.last_checkpoint and self.after_save is not None:
            self.after_save(trainer.global_step)

    @staticmethod
    def _gather_rng(trainer: L.Trainer) -> list[dict[str, Any]]:
        mine = rng_state()
        if trainer.world_size == 1 or not torch.distributed.is_initialized():
            return [mine]
        gathered: list[Any] = [None] * trainer.world_size
        torch.distributed.all_gather_object(gathered, mine)
        return gathered

    # -- what goes into the checkpoint -----------------------------------------------------------
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # We save in on_train_batch_start, when Lightning has already counted the next batch as
        # "ready". Record the loop as it stood at the end of the previous step (ready == completed),
        # else the restored total batch count is one ahead and validation shifts by one step.
        progress = checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]
        for counters in (progress["total"], progress["current"]):
            counters["ready"] = counters["started"] = counters["processed"] = counters["completed"]
        checkpoint[STATE_KEY] = {
            "global_step": trainer.global_step,  # the data order restarts at this optimizer step
            "rng": self._rng_for_save or [],    # one entry per rank
            "resumed_from_steps": list(self.resume_history),
        }
        if self.fingerprint is not None:
            checkpoint[FINGERPRINT_KEY] = self.fingerprint
        if self.spec is not None:
            checkpoint[SPEC_KEY] = self.spec

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Runs after datamodule.setup() and before the train dataloader is iterated.
        state = checkpoint[STATE_KEY]
        step = int(state["global_step"])
        train_set = trainer.datamodule.train_set
        # Micro-steps are per rank and the global batch's slots are world-size invariant, so this
        # holds even when the resumed run uses a different device count or accumulation.
        train_set.start_micro_step = step * self.grad_accum
        rng = state["rng"]
        if rng:
            self._pending_rng = rng[trainer.global_rank] if len(rng) == trainer.world_size else rng[0]
        self.last_saved_step = step
        self.resume_history = [*state.get("resumed_from_steps", []), step]
