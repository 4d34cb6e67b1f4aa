"""Where metrics go: a local long-format CSV (the source of truth) and Weights & Biases.

`metrics.csv` has one row per (step, metric): `step,tokens,metric,value`. Long format can be
appended forever (new metrics never force a rewrite, a resumed run never wipes earlier rows)
and is what analysis reads directly. On resume, rows a killed attempt logged *after* the
checkpoint's step are dropped first (resume.trim_metrics), so each (step, metric) appears once.

W&B (`WandbMirror`) copies metrics.csv and results.json; it is never ahead of them. It runs
offline automatically when there is no API key or no route to the server; offline runs can be
uploaded later with `wandb sync <job_dir>/wandb/offline-run-*`.

What a run defines (`define_metrics`), so every study's W&B workspace (analysis/dashboard.py in this package) can
put all runs on one axis:
- curves (`train/*`, `val/*`, including `val/loss_select`, `val/loss_report`, `val/loss@<source>`)
  are plotted against `tokens`, training tokens seen: the same quantity at any batch size, device
  count or resume, which steps are not;
- their summary is W&B's default, the last logged value as a plain number: the last validation, the
  number runs tables and `analyze wandb=` read. A `min` or `max` mode would turn each summary value
  into a `{"min": ...}` dict and quietly pick the best point on validation data;
- `final/*`, `params/*`, `eval/<task>/<metric>`, `status`, `tokens_seen` and `results` are summary
  only (`sync_record`), never history, so they have no step metric: they are the run's final numbers;
- `trainer/global_step` (= W&B's own step) stays in the history for readers but is hidden in the UI.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import urlparse

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from ..record.jobdir import JobDir, wandb_group
from ..record.variants import OUTPUT, head_variant
from ..spec.parts import WandbSpec


class LongCSVLogger(Logger):
    """Appends `step,tokens,metric,value` rows to a job's metrics.csv, flushed on every call."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = Path(path)

    @property
    def name(self) -> str:
        return "csv"

    @property
    def version(self) -> str:
        return "0"

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        pass  # the resolved config is written to results.json and config.yaml instead

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        tokens = metrics.get("tokens", "")
        new_file = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new_file:
                writer.writerow(["step", "tokens", "metric", "value"])
            for key, value in metrics.items():
                if key != "tokens":
                    writer.writerow([step, int(tokens) if tokens != "" else "", key, repr(float(value))])


def _has_wandb_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        import netrc

        host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def _reachable(url: str, timeout: float = 1.5) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_wandb_mode(requested: str) -> str:
    """'auto' -> 'online' with a key and a route to the server, else 'offline'.

    An explicit WANDB_MODE in the environment wins, as wandb users expect.
    """
    env = os.environ.get("WANDB_MODE")
    if env:
        return env
    if requested != "auto":
        return requested
    if _has_wandb_key() and _reachable(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")):
        return "online"
    return "offline"


def wandb_logs(wandb_dir: Path, run_id: str) -> list[Path]:
    """The transaction logs of one W&B run in a job's wandb folder, one per attempt, oldest first."""
    return sorted(Path(wandb_dir).glob(f"*run-*-{run_id}*/run-{run_id}.wandb"),
                  key=lambda f: (f.stat().st_mtime_ns, str(f)))


def read_wandb_log(wandb_dir: Path, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(history rows, summary) that W&B holds locally for `run_id`, over every attempt.

    Read back from the run's own transaction logs (offline and online runs both write them) with
    `wandb leet inspect --json`: what W&B will show, not what we meant to send. History rows are
    the logged dicts (with `_step`), oldest first; the summary is every update applied in order.
    """
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for record in wandb_records(wandb_dir, run_id):
        if record.get("type") == "history":
            rows.append(record["history"]["item"])
        elif record.get("type") == "summary":
            summary.update((record["summary"].get("update") or {}))
            for key in record["summary"].get("remove") or []:
                summary.pop(key, None)
    return rows, summary


def read_wandb_metric_definitions(wandb_dir: Path, run_id: str) -> dict[str, dict[str, Any]]:
    """The run's `define_metric` records by metric name or glob (the last one wins), as logged."""
    return {(m := record["metric"]).get("name") or m.get("glob_name"): m
            for record in wandb_records(wandb_dir, run_id) if record.get("type") == "metric"}


def wandb_records(wandb_dir: Path, run_id: str) -> Iterator[dict[str, Any]]:
    """Every record of the run's transaction logs (`wandb leet inspect --json`), attempt by attempt."""
    for f in wandb_logs(wandb_dir, run_id):
        done = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(f)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"could not read back W&B log {f}: {done.stderr.strip()[:200]}")
        for line in done.stdout.splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last record from a killed attempt


STEP_METRIC = "tokens"
CURVES = ("train/*", "val/*")
HIDDEN = ("trainer/global_step",)


def define_metrics(run: Any) -> None:
    """Curves against training tokens with W&B's plain last-value summary; see the module docstring."""
    run.define_metric(STEP_METRIC)
    for glob in CURVES:
        run.define_metric(glob, step_metric=STEP_METRIC)
    for name in HIDDEN:
        run.define_metric(name, hidden=True)


def _chose(overrides: Any, key: str) -> bool:
    """Whether the job's command line (results.json `overrides`) set `key` (`output=...`, `+output=...`)."""
    return any(str(o).lstrip("+~").partition("=")[0] == key for o in overrides or [])


def run_identity(record: Mapping[str, Any], job_dir: str | os.PathLike, group: str, job_type: str,
                 tags: list[str]) -> tuple[str, str, list[str]]:
    """(group, job type, tags) of a job's W&B run, from its record: every axis a study varies tells the
    runs apart. The job type is the variant as the analysis names it (record/variants.py: the input and
    the head), the group the study (`wandb_group`), the tags each axis value (input, head, seed, model)."""
    input_name = str(record.get("input") or job_type)
    output_name = str(record.get(OUTPUT) or ((record.get("config") or {}).get(OUTPUT) or {}).get("name") or "untied")
    variant = head_variant(input_name, output_name, _chose(record.get("overrides"), OUTPUT))
    axes = {"input": input_name, OUTPUT: output_name, "seed": record.get("seed"), "model": record.get("model")}
    named = [f"{k}:{v}" for k, v in axes.items() if v is not None]
    extra = [t for t in tags if t.partition(":")[0] not in axes]
    return wandb_group(str(record.get("sweep") or group), job_dir), variant, [*named, *extra]


class WandbMirror:
    """A job's W&B run as a copy of its record, never ahead of it.

    - One run per job life: the id is chosen before the first step, kept in results.json and reused
      by every retry and every eval-only re-run (training/job.py decides when a life starts).
    - History is copied from metrics.csv, one `log(row, step=step)` per optimizer step, and only
      for steps a checkpoint covers (`sync_history(upto)` after last.ckpt is in place, and after
      the final weights are saved). A killed attempt therefore never leaves W&B points that the
      resumed run logs again; on start the mirror reads back what W&B already holds
      (`read_wandb_log`) and sends only what is missing. W&B's history thus equals metrics.csv,
      point for point, at the cost of curves that lag the run by up to checkpoint.every_steps.
    - The summary holds the record (`results`: results.json without the config, which is the run
      config) plus flat `final/*`, `eval/*`, `params/*` keys for the W&B tables.
    - The run is named from the record on disk (`run_identity`): group, job type (the variant) and
      tags; `group`, `job_type` and `tags` are what the caller knows without it (study, input).
    """

    def __init__(self, settings: WandbSpec, job: JobDir, run_id: str, run_name: str, group: str,
                 job_type: str, tags: list[str], config: dict[str, Any]):
        import wandb

        self.wandb_dir = job.wandb_dir
        self.wandb_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_csv = job.metrics
        history, _ = read_wandb_log(self.wandb_dir, run_id)
        self.through = max((int(r["_step"]) for r in history if "_step" in r), default=-1)
        group, job_type, tags = run_identity(job.read_results() or {}, job.path, group, job_type, tags)
        self.run = wandb.init(
            project=settings.project, entity=settings.entity, name=run_name, group=group,  # conf/logger/wandb.yaml
            job_type=job_type, tags=tags, dir=str(job.path), mode=resolve_wandb_mode(settings.mode),
            config=config, id=run_id, resume="allow", reinit="finish_previous",
            # The job's console is already kept whole in run.log (console.py); W&B's own
            # capture would copy every progress-bar redraw through its wrapper during training.
            settings=wandb.Settings(console="off"),
        )
        define_metrics(self.run)

    @staticmethod
    def has_history(job: JobDir, run_id: str) -> bool:
        return bool(read_wandb_log(job.wandb_dir, run_id)[0])

    def sync_history(self, upto: int | None = None) -> int:
        """Send metrics.csv rows with through < step <= upto (None: all); returns rows sent."""
        steps: dict[int, dict[str, float]] = {}
        if self.metrics_csv.exists():
            with open(self.metrics_csv, newline="") as fh:
                for row in csv.DictReader(fh):
                    try:
                        step, value = int(row["step"]), float(row["value"])
                    except (TypeError, ValueError):
                        continue  # a torn last line: the next sync (or trim on resume) deals with it
                    if step > self.through and (upto is None or step <= upto):
                        entry = steps.setdefault(step, {"trainer/global_step": step})
                        if row["tokens"] != "":
                            entry["tokens"] = int(row["tokens"])
                        entry[row["metric"]] = value
        for step in sorted(steps):
            self.run.log(steps[step], step=step)
            self.through = step
        return len(steps)

    def sync_record(self, record: Mapping[str, Any]) -> None:
        summary: dict[str, Any] = {"results": {k: v for k, v in record.items() if k != "config"},
                                   "status": record.get("status")}
        summary.update({f"final/{k}": v for k, v in (record.get("final") or {}).items()})
        summary.update({f"params/{k}": v for k, v in (record.get("params") or {}).items()
                        if isinstance(v, (int, float))})
        if (record.get("eval") or {}).get("tasks"):
            from ..evaluation.harness import wandb_metrics

            summary.update(wandb_metrics(record["eval"]))
        if record.get("tokens_seen") is not None:
            summary["tokens_seen"] = record["tokens_seen"]
        self.run.summary.update(summary)

    def finish(self, ok: bool) -> None:
        self.run.finish(exit_code=0 if ok else 1)
