"""Find job directories and read them (SCHEMA.md) into two pandas frames.

``Study.jobs`` has one row per job directory found, including jobs that failed, are still
running, or lack final metrics; ``included`` / ``reason`` say whether a job enters the
tables and why not. ``Study.long`` is the long-format frame (one row per logged value):
per-step curves from metrics.csv (kind="curve"), final metrics from results.json
(kind="final") and lm-eval metrics (kind="eval", with lm-eval's ``stderr``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import AnalysisError
from analysis.variants import assign_variants

RESULTS_FILE = "results.json"
METRICS_FILE = "metrics.csv"
# The final metrics every completed job must report to be comparable in the main table.
REQUIRED_FINAL = ("val_ppl", "val_bpb")
CURVE_COLUMNS = ["step", "tokens", "metric", "value"]
# Job-level columns copied onto every long-format row, so each value carries its provenance.
JOB_KEY_COLUMNS = ["run", "sweep", "job_key", "input", "variant", "model", "seed", "data", "included"]
# Subtrees that never hold job directories; pruned so discovery stays fast on real output trees.
_SKIP_DIRS = {"checkpoints", "wandb", ".hydra", "__pycache__", ".git"}


@dataclass
class Study:
    jobs: pd.DataFrame
    long: pd.DataFrame
    label_props: dict[str, list[str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def included_jobs(self) -> pd.DataFrame:
        return self.jobs[self.jobs["included"]]

    @property
    def excluded_jobs(self) -> pd.DataFrame:
        return self.jobs[~self.jobs["included"]]


def display_path(path: Path) -> str:
    """Path relative to the working directory when inside it (short, readable), else absolute."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute)


def discover(roots: list[str | Path]) -> tuple[list[Path], list[Path]]:
    """Job dirs (holding results.json) and Hydra job dirs that never wrote results.json."""
    with_results: set[Path] = set()
    orphans: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise AnalysisError(f"run directory not found: {root}")
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath).resolve()
            if RESULTS_FILE in filenames:
                with_results.add(here)
            elif ".hydra" in dirnames or METRICS_FILE in filenames:
                # A job that crashed before writing results.json still has its Hydra dir; list it.
                orphans.add(here)
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
    return sorted(with_results), sorted(orphans - with_results)


def flatten(prefix: str, value, out: dict) -> dict:
    """Nested dict -> dotted columns; lists become JSON text so they stay hashable."""
    if isinstance(value, dict):
        for key, sub in value.items():
            flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = json.dumps(value)
    else:
        out[prefix] = value
    return out


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def exclusion_reason(results: dict) -> str:
    """Empty string when the job is complete and comparable, else why it is left out."""
    status = results.get("status")
    if status != "completed":
        error = results.get("error")
        return f"status={status}" + (f": {error}" if error else "")
    final = results.get("final") or {}
    missing = [k for k in REQUIRED_FINAL if not _finite(final.get(k))]
    if missing:
        return "completed but final metrics missing or non-finite: " + ", ".join(missing)
    return ""


def job_record(results: dict, run: str, job_dir: Path) -> dict:
    """One flat row of job-level fields; absent schema fields become NaN rather than errors."""
    rec = {
        "run": run,
        "sweep": results.get("sweep") or job_dir.parent.name,
        "job_key": results.get("job_key") or job_dir.name,
        "input": results.get("input"),
        "model": results.get("model"),
        "seed": results.get("seed"),
        "code_width": results.get("code_width"),
        "status": results.get("status"),
        "error": results.get("error"),
        "schema_version": results.get("schema_version"),
        "tokens_seen": results.get("tokens_seen"),
        "train_seconds": results.get("train_seconds"),
        "data": (results.get("data") or {}).get("name"),
    }
    for section in ("input_props", "params", "data", "final"):
        flatten(section, results.get(section) or {}, rec)
    rec["reason"] = exclusion_reason(results)
    rec["included"] = rec["reason"] == ""
    return rec


def eval_rows(results: dict) -> list[dict]:
    """lm-eval metrics as long rows with their stderr; tolerates lm-eval's ',none' filter suffix."""
    tasks = ((results.get("eval") or {}).get("tasks")) or {}
    rows = []
    for task, metrics in tasks.items():
        clean = {name.split(",")[0]: value for name, value in (metrics or {}).items()}
        for name, value in clean.items():
            if name.endswith("_stderr") or not _finite(value):
                continue
            stderr = clean.get(f"{name}_stderr")
            rows.append({"kind": "eval", "metric": f"{task}/{name}", "value": float(value),
                         "stderr": float(stderr) if _finite(stderr) else np.nan})
    return rows


def read_curves(job_dir: Path, notes: list[str], run: str) -> pd.DataFrame | None:
    path = job_dir / METRICS_FILE
    if not path.is_file():
        return None
    try:
        curves = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        notes.append(f"{run}: metrics.csv unreadable ({type(exc).__name__}); curves omitted")
        return None
    missing = [c for c in CURVE_COLUMNS if c not in curves.columns]
    if missing:
        notes.append(f"{run}: metrics.csv lacks columns {missing}; curves omitted")
        return None
    curves = curves[CURVE_COLUMNS].copy()
    curves["value"] = pd.to_numeric(curves["value"], errors="coerce")
    curves["kind"] = "curve"
    curves["stderr"] = np.nan
    curves["run"] = run
    return curves


def read_job(job_dir: Path, notes: list[str]) -> tuple[dict, list[pd.DataFrame]]:
    run = display_path(job_dir)
    try:
        results = json.loads((job_dir / RESULTS_FILE).read_text())
    except (OSError, ValueError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        return unreadable_record(run, job_dir, f"unreadable results.json ({type(exc).__name__}: {first_line})"), []
    return results_to_frames(results, run, job_dir, read_curves(job_dir, notes, run), notes)


def results_to_frames(results: dict, run: str, job_dir: Path, curves: pd.DataFrame | None,
                      notes: list[str]) -> tuple[dict, list[pd.DataFrame]]:
    """Shared by the run-directory and W&B sources: results dict + curves -> record + long rows."""
    rec = job_record(results, run, job_dir)
    config = results.get("config")
    rec["_config_flat"] = flatten("", config, {}) if isinstance(config, dict) else {}
    frames = []
    last_step = np.nan
    if curves is not None and len(curves):
        frames.append(curves)
        last_step = curves["step"].max()
    elif rec["included"]:
        notes.append(f"{run}: no per-step metrics; it appears in tables but not in curve figures")
    point_rows = [{"kind": "final", "metric": k, "value": float(v), "stderr": np.nan}
                  for k, v in (results.get("final") or {}).items() if _finite(v)]
    point_rows += eval_rows(results)
    if point_rows:
        points = pd.DataFrame(point_rows)
        points["step"] = last_step
        points["tokens"] = results.get("tokens_seen", np.nan)
        points["run"] = run
        frames.append(points)
    return rec, frames


def unreadable_record(run: str, job_dir: Path, reason: str) -> dict:
    return {"run": run, "sweep": job_dir.parent.name, "job_key": job_dir.name,
            "status": "unreadable", "error": reason, "reason": reason, "included": False}


def build_study(records: list[dict], frames: list[pd.DataFrame], sources: list[str],
                notes: list[str]) -> Study:
    """Records + long pieces -> Study with variant labels and job columns on every long row."""
    if not records:
        raise AnalysisError("no jobs found under " + ", ".join(sources) + f" (looked for {RESULTS_FILE})")
    configs = {r["run"]: r.pop("_config_flat", {}) for r in records}
    jobs = pd.DataFrame.from_records(records)
    for col in ("input", "model", "seed", "data", "code_width"):
        if col not in jobs:
            jobs[col] = np.nan
    jobs["included"] = jobs["included"].astype(bool)
    jobs, label_props = assign_variants(jobs)
    long = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=CURVE_COLUMNS + ["kind", "stderr", "run"])
    prop_cols = [c for c in jobs.columns if c.startswith("input_props.")]
    long = long.merge(jobs[JOB_KEY_COLUMNS + ["code_width"] + prop_cols], on="run", how="left")
    notes.extend(pooled_config_notes(configs, jobs))
    return Study(jobs=jobs, long=long, label_props=label_props, sources=sources, notes=notes)


# Keys that legitimately differ between seeds of one variant (seeds, output paths, run names).
_POOLING_IGNORED = ("seed", "dir", "path", "name", "wandb", "hydra", "job", "sweep", "output", "out_root", "tags")


def pooled_config_notes(configs: dict[str, dict], jobs: pd.DataFrame) -> list[str]:
    """Warn when jobs pooled into one table row ran with different resolved configs."""
    notes = []
    included = jobs[jobs["included"]]
    for (model, variant, data), group in included.groupby(["model", "variant", "data"], dropna=False):
        flat = [configs.get(run, {}) for run in group["run"]]
        if len(flat) < 2 or not any(flat):
            continue
        keys = set().union(*flat)
        differing = sorted(k for k in keys
                           if not any(tok in k.lower() for tok in _POOLING_IGNORED)
                           and len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1)
        if differing:
            shown = ", ".join(differing[:6]) + (" ..." if len(differing) > 6 else "")
            notes.append(f"row {model} / {variant} pools jobs whose resolved configs differ in: {shown}")
    return notes


def load_run_dirs(roots: list[str | Path]) -> Study:
    """Discover and read every job under ``roots``."""
    job_dirs, orphans = discover(roots)
    notes: list[str] = []
    records, frames = [], []
    for job_dir in job_dirs:
        rec, job_frames = read_job(job_dir, notes)
        records.append(rec)
        frames.extend(job_frames)
    for orphan in orphans:
        records.append(unreadable_record(display_path(orphan), orphan, "no results.json (job never finished writing it)")
                       | {"status": "missing results.json"})
    return build_study(records, frames, [str(r) for r in roots], notes)
