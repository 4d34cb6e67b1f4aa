"""Where metrics go: a local long-format CSV (the source of truth) and Weights & Biases.

`metrics.csv` has one row per (step, metric): `step,tokens,metric,value`. Long format can be
appended forever (new metrics never force a rewrite, a resumed run never wipes earlier rows)
and is what analysis reads directly. On resume, rows a killed attempt logged *after* the
checkpoint's step are dropped first (resume.trim_metrics), so each (step, metric) appears once.

W&B (`WandbMirror`) copies metrics.csv and results.json; it is never ahead of them: each step goes
to W&B right after LongCSVLogger writes it (live), and a resume first rewinds W&B to what the
trimmed metrics.csv holds. It runs
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import urlparse

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from ..console import say
from ..record.jobdir import METRICS_FILE, JobDir, is_single_run, wandb_group
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
        mirror = _LIVE.get(self.path.resolve())
        if mirror is not None and step is not None:  # the same points, once they are on disk
            mirror.log_live(int(step), {k: float(v) for k, v in metrics.items() if k != "tokens"},
                            None if tokens == "" else int(tokens))


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


INTERNAL = ("tokens", "trainer/global_step")  # history keys that are the step, not a point


def _number(value: Any) -> Any:
    try:
        return repr(float(value))  # NaN equals NaN, and metrics.csv keeps repr(float)
    except (TypeError, ValueError):
        return repr(value)


def read_metrics_steps(path: Path) -> dict[int, dict[str, Any]]:
    """metrics.csv as {step: {metric: value}} (values compared as repr(float)); a torn line is skipped."""
    steps: dict[int, dict[str, Any]] = {}
    if path.exists():
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    step = int(row["step"])
                    steps.setdefault(step, {})[row["metric"]] = _number(float(row["value"]))
                except (TypeError, ValueError):
                    continue
    return steps


def first_difference(history: list[dict[str, Any]], steps: Mapping[int, Mapping[str, Any]]) -> int | None:
    """The first step whose W&B row is not metrics.csv's points at that step (a killed attempt's step
    past its checkpoint, a row half written), or None when W&B holds only what metrics.csv says."""
    for row in sorted((r for r in history if "_step" in r), key=lambda r: int(r["_step"])):
        points = {k: _number(v) for k, v in row.items() if not k.startswith("_") and k not in INTERNAL}
        if dict(steps.get(int(row["_step"]), {})) != points:
            return int(row["_step"])
    return None


LOG_HEADER, LOG_BLOCK, CHUNK_HEADER = 7, 32768, 7   # a W&B transaction log: ':W&B' magic version, then
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4               # leveldb-log blocks of chunks (crc, length, type)


def log_records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of each whole record of a transaction log, in order; a torn tail ends it."""
    pos, start, parts = LOG_HEADER, None, []
    while pos + CHUNK_HEADER <= len(data):
        left = LOG_BLOCK - pos % LOG_BLOCK
        if left < CHUNK_HEADER:  # a block's zero-filled trailer
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        end = pos + CHUNK_HEADER + length
        if kind not in (FULL, FIRST, MIDDLE, LAST) or end > len(data):
            return
        if kind in (FULL, FIRST):
            start, parts = pos, []
        parts.append(data[pos + CHUNK_HEADER:end])
        if kind in (FULL, LAST) and start is not None:
            yield start, b"".join(parts)
            start = None
        pos = end


def rewind_logs(wandb_dir: Path, run_id: str, step: int) -> list[dict[str, Any]]:
    """Cut every local transaction log of the run before its first history record at `step` or later
    (what follows it in that attempt's log goes too: the resumed attempt sends the summary again);
    returns the history W&B then holds. The logs are earlier attempts', written by no process now."""
    from wandb.proto import wandb_internal_pb2 as pb

    for log in wandb_logs(wandb_dir, run_id):
        data = log.read_bytes()
        for offset, raw in log_records(data):
            record = pb.Record()
            try:
                record.ParseFromString(raw)
            except Exception:  # noqa: BLE001 - not a record: leave the log as it is from here
                break
            if record.WhichOneof("record_type") == "history" and record.history.step.num >= step:
                if log.with_name(log.name + ".synced").exists():
                    say(f"[wandb] {log.parent.name} was synced before this resume: the server keeps its "
                        f"points from step {step} on")
                with open(log, "r+b") as fh:
                    fh.truncate(offset)
                break
    return read_wandb_log(wandb_dir, run_id)[0]


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


# The mirror of each job this process runs, by its metrics.csv: LongCSVLogger hands it every step it
# writes (rank 0, in the process that opened the mirror; spawned ranks have none and sync at the end).
_LIVE: dict[Path, "WandbMirror"] = {}
RUN_COMMAND = "-m fixedcode_study.run"  # the study's own command (studies/grids.py launches it)


def job_command(record: Mapping[str, Any], job_dir: str | os.PathLike) -> list[str]:
    """The arguments of `python -m fixedcode_study.run` that re-run this job alone, into this directory:
    its own overrides (results.json `overrides`), after `-m` for a sweep's job (multirun/<study>/)."""
    overrides = [str(o) for o in record.get("overrides") or []]
    return overrides if is_single_run(job_dir) else ["-m", *overrides]


@contextmanager
def _argv(args: list[str]) -> Iterator[None]:
    """sys.argv[1:] = args while W&B starts the run (its settings record sys.argv[1:], and offer no
    setting for it), then the process's own again."""
    saved = list(sys.argv)
    sys.argv = [saved[0] if saved else "python", *args]
    try:
        yield
    finally:
        sys.argv = saved


def resolved_config(config: Mapping[str, Any], mode: str, runtime: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run config as the job ran: `logger.wandb.mode` as resolved (never `auto`) and, once the
    runtime is known (results.json `runtime`), `threads`, `train.compile` and `runtime.*` as resolved."""
    out = json.loads(json.dumps(dict(config), default=str))
    wandb_settings = ((out.get("logger") or {}).get("wandb"))
    if isinstance(wandb_settings, dict):
        wandb_settings["mode"] = mode
    if runtime:
        out["runtime"] = dict(runtime)
        if "threads" in runtime and "threads" in out:
            out["threads"] = runtime["threads"]
        if "compile" in runtime and isinstance(out.get("train"), dict) and "compile" in out["train"]:
            out["train"]["compile"] = runtime["compile"]
    return out


class WandbMirror:
    """A job's W&B run as a copy of its record, never ahead of it.

    - One run per job life: the id is chosen before the first step, kept in results.json and reused
      by every retry and every eval-only re-run (training/job.py decides when a life starts).
    - History is live: each step LongCSVLogger writes to metrics.csv goes to W&B after it
      (`log_live`), as one row per optimizer step with W&B's own `_timestamp` / `_runtime` of when it
      was logged (a step's row is committed when the next step is logged, or at the end).
      `sync_history(upto)` sends what metrics.csv holds and W&B lacks (a resume's covered steps,
      spawned ranks' curves after the fit).
    - W&B equals metrics.csv point for point, after kills too. A killed attempt may have logged
      steps past its last checkpoint, which the resumed attempt trims from metrics.csv
      (resume.trim_metrics) and trains again. On start the mirror reads back what W&B holds
      (`read_wandb_log`), compares it with metrics.csv, and rewinds W&B to the first step where they
      differ: the earlier attempts' local transaction logs are cut before that step's record
      (`rewind_logs`), and an online run is rewound on the server too (`resume_from=<id>?_step=N`;
      rewind is a W&B preview: a server without it keeps the killed attempt's points past the
      checkpoint, and the job says so in one line). The resumed attempt then logs those steps
      again, once. (An offline run synced between a kill and its resume keeps the killed attempt's
      extra points on the server too: sync after the job ends.)
    - The summary holds the record (`results`: results.json without the config, which is the run
      config) plus flat `final/*`, `eval/*`, `params/*` keys for the W&B tables.
    - The run is named from the record on disk (`run_identity`): group, job type (the variant) and
      tags; `group`, `job_type` and `tags` are what the caller knows without it (study, input).
    - The run config is the resolved run (`resolved_config`: the W&B mode at start, the runtime from
      the first record that has it), and its program is the job's own command (`job_command`), not
      the process's: in a sweep that is a loky worker's, with the whole sweep's arguments.
    """

    def __init__(self, settings: WandbSpec, job: JobDir, run_id: str, run_name: str, group: str,
                 job_type: str, tags: list[str], config: dict[str, Any]):
        import wandb

        self.wandb_dir = job.wandb_dir
        self.wandb_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_csv = job.metrics
        self.mode = resolve_wandb_mode(settings.mode)
        record = job.read_results() or {}
        history, _ = read_wandb_log(self.wandb_dir, run_id)
        rewind = first_difference(history, read_metrics_steps(self.metrics_csv))
        if rewind is not None:
            say(f"[wandb] run {run_id} holds steps from {rewind} on that {METRICS_FILE} does not (a killed attempt's, "
                f"past its checkpoint): rewound to step {rewind}, this attempt logs them again")
            history = rewind_logs(self.wandb_dir, run_id, rewind)
        self.through = max((int(r["_step"]) for r in history if "_step" in r), default=-1)
        group, job_type, tags = run_identity(record, job.path, group, job_type, tags)
        self.config = resolved_config(config, self.mode, record.get("runtime"))
        branch: dict[str, Any] = {"id": run_id, "resume": "allow"}
        if rewind is not None and self.mode == "online":
            branch = {"resume_from": f"{run_id}?_step={rewind}"}
        init = dict(
            project=settings.project, entity=settings.entity, name=run_name, group=group,  # conf/logger/wandb.yaml
            job_type=job_type, tags=tags, dir=str(job.path), mode=self.mode, config=self.config,
            reinit="finish_previous",
            # The job's console is already kept whole in run.log (console.py); W&B's own
            # capture would copy every progress-bar redraw through its wrapper during training.
            settings=wandb.Settings(console="off", program=RUN_COMMAND))
        with _argv(job_command(record, job.path)):  # W&B records sys.argv[1:] as the program's args
            try:
                self.run = wandb.init(**init, **branch)
            except Exception as err:  # noqa: BLE001 - a server without rewind: resume, and say what stays
                if "resume_from" not in branch:
                    raise
                say(f"[wandb] could not rewind run {run_id} to step {rewind} ({type(err).__name__}); the server "
                    f"keeps the killed attempt's points from step {rewind} on")
                self.run = wandb.init(**init, id=run_id, resume="allow")
        define_metrics(self.run)
        self._pending: int | None = None
        self._pid = os.getpid()   # a forked rank inherits _LIVE but not the run: it logs nothing live
        _LIVE[self.metrics_csv.resolve()] = self

    def log_live(self, step: int, metrics: Mapping[str, float], tokens: int | None) -> None:
        """One logged step, as LongCSVLogger wrote it: the same values and key set as `sync_history`
        sends, so a step logged live equals its metrics.csv rows. Never raises into training."""
        if os.getpid() != self._pid:
            return
        if step < self.through or (step == self.through and self._pending != step):
            return  # W&B has this step already (committed)
        entry: dict[str, Any] = {"trainer/global_step": step, **metrics}
        if tokens is not None:
            entry["tokens"] = tokens
        try:
            self.run.log(entry, step=step)
        except Exception as err:  # noqa: BLE001 - the record on disk is the truth; sync catches up
            _LIVE.pop(self.metrics_csv.resolve(), None)
            say(f"[wandb] live logging stopped ({type(err).__name__}: {err}".splitlines()[0]
                + f"); {METRICS_FILE} is unaffected and the next sync sends the rest")
            return
        self.through, self._pending = step, step

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
            self.through, self._pending = step, None
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
        resolved = resolved_config(self.config, self.mode, record.get("runtime"))
        changed = {k: v for k, v in resolved.items() if self.config.get(k) != v}
        if changed:  # the runtime, resolved once the attempt knows it (before its first step)
            self.run.config.update(changed, allow_val_change=True)
            self.config = resolved

    def finish(self, ok: bool) -> None:
        if _LIVE.get(self.metrics_csv.resolve()) is self:
            del _LIVE[self.metrics_csv.resolve()]
        self.run.finish(exit_code=0 if ok else 1)
