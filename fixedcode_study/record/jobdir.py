"""A job directory: its layout, its lock, and the life cycle of results.json.

Every file name of a job is spelled here and nowhere else:

    <job>/results.json                the record: source of truth for every number analysis reports
    <job>/metrics.csv                 per-step curves (long format, see training/loggers.py)
    <job>/metrics.unfinished-*.csv    curves of an attempt that died before its first checkpoint
    <job>/config.yaml                 the resolved config
    <job>/gf2_matrix.json             the GF(2) recoding, when the input has one
    <job>/.lock                       held while a process works on the job
    <job>/run.log                     the job's log: library output (Lightning, W&B, lm-eval, warnings,
                                      subprocesses) and tracebacks, every attempt appended
                                      (console.py; Hydra's job logging writes the same file)
    <job>/samples.json                generated text from the final weights (fixedcode generate)
    <job>/checkpoints/last.ckpt       resume state (Lightning), written every checkpoint.every_steps
    <job>/checkpoints/step-XXXXXXX.ckpt  kept snapshots (checkpoint.keep_every_steps)
    <job>/checkpoints/final/          final weights (record/checkpoint.py)
    <job>/wandb/                      the job's W&B run (offline or online)

results.json moves running -> completed | eval_failed | failed | preempted:

  completed    everything the job was asked to do succeeded: trained, final weights saved, and the
               requested evaluation (if any) recorded. Only this status is a result.
  eval_failed  trained and saved, but the requested evaluation failed (`eval.error` says why);
               re-running evaluates again without retraining.
  failed       an error stopped it; re-running resumes from last.ckpt when there is one.
  preempted    stopped by a signal (last.ckpt saved when it happened inside the training loop);
               re-running resumes it.

`trained` (is_trained) means the final weights and numbers exist, whatever the status: a job
stopped during evaluation is never trained twice. A job whose fingerprint equals a completed job's
in another study is not trained at all: that job's final weights are hard-linked into its
checkpoints/final/ and results.json `reused_from` names it (record/reuse.py). Every record carries the job's fingerprint
(record/fingerprint.py). Each write is atomic (record/atomic.py) and happens under the job lock.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import JobBusy  # noqa: F401  (raised here; importers may take it from either)
from . import atomic

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
METRICS_FILE = "metrics.csv"
JOB_CONFIG_FILE = "config.yaml"
GF2_MATRIX_FILE = "gf2_matrix.json"
LOCK_FILE = ".lock"
JOB_LOG_FILE = "run.log"  # = Hydra's ${hydra.job.name}.log for the `run` app
CHECKPOINTS = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"
FINAL_CHECKPOINT = "final"
WEIGHTS_FILE = "model.safetensors"  # inside a final checkpoint (record/checkpoint.py writes it)

RUNNING, COMPLETED, FAILED, PREEMPTED = "running", "completed", "failed", "preempted"
EVAL_FAILED = "eval_failed"
WANDB_DIR = "wandb"
# An outside model evaluated as a reference (hub/external.py): <study>/external/<name@revision>/external.json.
# Not a job: analysis shows it as a marked reference row and never in a statistic.
EXTERNAL_DIR, EXTERNAL_FILE = "external", "external.json"
SAMPLES_FILE = "samples.json"
PROBES_FILE = "probes.json"              # a job's probe results (probing/run.py writes it)
CROSS_FILE = "probes_cross.json"         # a probe run's cross-job results, beside the jobs
CROSS_GLOB = "probes_cross*.json"        # probes_cross-<data cache key>.json when one study spans several corpora
# A composition of two of a study's jobs (`fixedcode compose study=`, studies/pairs.py), beside the jobs:
# <study>/compose/<arm>,seeds=<a>+<b>/compose.json (composition/run.py's record). Not a job: the analysis
# reads it as one pair of models (analysis/read/compose.py).
COMPOSE_DIR, COMPOSE_FILE = "compose", "compose.json"
# A job's adaptation to its held-out tokens (`fixedcode adapt study=`, studies/adapted.py), beside the jobs:
# <study>/adapt/<job_key>/adapt.json (adaptation/run.py's record).
ADAPT_DIR, ADAPT_FILE = "adapt", "adapt.json"
# Where conf/config.yaml's hydra.sweep.dir / hydra.run.dir put jobs: <out_root>/<root>/<name>/<job_key>/.
STUDY_ROOTS = ("multirun", "runs")


class JobDir:
    """Paths and record of one job directory (it need not exist yet)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @classmethod
    def of_final_checkpoint(cls, checkpoint: str | os.PathLike) -> "JobDir | None":
        """The job that wrote a final checkpoint folder, when it sits where jobs put it."""
        checkpoint = Path(checkpoint).resolve()
        if checkpoint.name != FINAL_CHECKPOINT or checkpoint.parent.name != CHECKPOINTS:
            return None
        return cls(checkpoint.parent.parent)

    def __repr__(self) -> str:
        return f"JobDir({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.path.name

    # -- layout ----------------------------------------------------------------------------------
    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def metrics(self) -> Path:
        return self.path / METRICS_FILE

    def set_aside_metrics(self) -> Path | None:
        """Move the curves of an attempt that left no checkpoint out of the way (kept, not trusted)."""
        if not self.metrics.exists():
            return None
        aside = self.path / f"metrics.unfinished-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        os.replace(self.metrics, aside)
        return aside

    @property
    def wandb_dir(self) -> Path:
        return self.path / WANDB_DIR

    @property
    def samples(self) -> Path:
        return self.path / SAMPLES_FILE

    @property
    def log_file(self) -> Path:
        return self.path / JOB_LOG_FILE

    @property
    def config(self) -> Path:
        return self.path / JOB_CONFIG_FILE

    @property
    def gf2_matrix(self) -> Path:
        return self.path / GF2_MATRIX_FILE

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoints / LAST_CHECKPOINT

    def snapshot(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:07d}.ckpt"

    @property
    def final_checkpoint(self) -> Path:
        return self.checkpoints / FINAL_CHECKPOINT

    def resume_point(self) -> Path | None:
        """last.ckpt when a previous attempt left one, else None. A kill in the middle of replacing
        a sharded (folder) checkpoint leaves only `last.ckpt.old` (record/atomic.py place): use it."""
        if self.last_checkpoint.exists():
            return self.last_checkpoint
        old = atomic.displaced(self.last_checkpoint)
        return old if old.exists() else None

    @staticmethod
    def partial(checkpoint: Path) -> Path:
        """Where a checkpoint is written before it is renamed into place (training/resume.py)."""
        return checkpoint.with_name(f".{checkpoint.name}.tmp")

    def drop_resume_state(self) -> None:
        """Remove last.ckpt (and a save that was cut short) once the job no longer needs it.
        Either may be a folder (FSDP's sharded state_dict_type writes one)."""
        last = self.last_checkpoint
        for leftover in (last, self.partial(last), atomic.displaced(last)):
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink(missing_ok=True)

    # -- the record --------------------------------------------------------------------------------
    def read_results(self) -> dict[str, Any] | None:
        if not self.results.exists():
            return None
        try:
            data = json.loads(self.results.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            return None
        return data if isinstance(data, dict) else None

    def write_results(self, record: Mapping[str, Any]) -> None:
        atomic.write_json(self.results, record)

    def is_trained(self, record: Mapping[str, Any] | None = None) -> bool:
        """Final numbers recorded AND the final weights they point to exist (any status)."""
        res = self.read_results() if record is None else record
        if not res:
            return False
        final = res.get("final")
        if not isinstance(final, dict) or not isinstance(final.get("val_loss"), (int, float)):
            return False
        ckpt = res.get("checkpoint")
        return bool(ckpt) and (self.path / ckpt / WEIGHTS_FILE).exists()

    def is_completed(self) -> bool:
        """The completion marker: results.json says completed AND the job is trained."""
        res = self.read_results()
        return bool(res) and res.get("status") == COMPLETED and self.is_trained(res)

    def start_attempt(self, record: dict[str, Any], previous: Mapping[str, Any] | None, new_life: bool) -> dict[str, Any]:
        """Number this attempt and give it the job's W&B run id.

        One W&B run per job life: every retry, resume and eval-only re-run keeps the stored id; a
        new life (training from step 0 over a previous one that W&B already holds curves of, or
        force=true) starts a new run and attempt count. Returns the record (updated in place).
        """
        previous = previous or {}
        keep = not new_life and previous.get("wandb_id")
        record["attempts"] = int(previous.get("attempts", 0)) + 1 if keep else 1
        record["wandb_id"] = previous["wandb_id"] if keep else uuid.uuid4().hex[:12]
        return record

    # -- exclusive use ------------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold an exclusive lock on the job directory while it trains.

        Two overlapping sweeps, a double submission or a requeue while the old job still runs would
        otherwise train into the same directory at once. The lock dies with its process, so a
        killed job never leaves a stale lock behind.
        """
        import fcntl  # POSIX only; imported here so analysis (which reads the names above) runs anywhere

        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / LOCK_FILE, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                raise JobBusy(f"running in another process ({fh.read().strip() or 'unknown'}); not started") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"{socket.gethostname()} pid {os.getpid()}\n")
            fh.flush()
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


# conf/config.yaml: a job without -m runs in ${out_root}/runs/${name}/<key>, a sweep's jobs (`run -m`,
# `fixedcode sweep`) in ${out_root}/multirun/${name}/<key>.
SINGLE_RUNS = "runs"


def wandb_group(study: str, job_dir: str | os.PathLike) -> str:
    """The W&B group of a job: its study for a sweep's job, `runs/<study>` for a one-off run (started
    without -m, so it sits in runs/<study>/): a `fixedcode run` that kept the default name=main never
    lands in the main study's group, nor in the filter of its workspace (analysis/dashboard.py applies
    the same rule to the job directories it reads)."""
    return f"{SINGLE_RUNS}/{study}" if is_single_run(job_dir) else study


def is_single_run(job_dir: str | os.PathLike) -> bool:
    """A job started without -m: it sits in runs/<study>/<key> (conf/config.yaml hydra.run.dir)."""
    return Path(job_dir).parent.parent.name == SINGLE_RUNS


def versions() -> dict[str, str | None]:
    """Versions of the packages that shape a result, for the record."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for pkg in ("fixedcode-study", "torch", "lightning", "hydra-core", "wandb", "tokenizers", "lm-eval"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out
