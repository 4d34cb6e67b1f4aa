"""Find job directories and read them (docs/results-schema.md) into two pandas frames.

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

from ..errors import AnalysisError
from .breakdown import breakdown_frame, breakdown_rows
from .external import read_externals, setting_notes as external_notes
from .ladder import ladder_order, split_contexts
from .records import _finite, display_path, eval_rows, is_crn
from .variants import TUNED_PREFIXES, assign_variants
from ...record.jobdir import (
    CHECKPOINTS,
    COMPLETED,
    METRICS_FILE,
    RESULTS_FILE,
)

# The final metrics every completed job must report to be comparable in the main table.
REQUIRED_FINAL = ("val_ppl", "val_bpb")
CURVE_COLUMNS = ["step", "tokens", "metric", "value"]
# Job-level columns copied onto every long-format row, so each value carries its provenance.
JOB_KEY_COLUMNS = ["run", "sweep", "job_key", "input", "variant", "model", "seed", "data", "included", "crn"]
# Subtrees that never hold job directories; pruned so discovery stays fast on real output trees.
_SKIP_DIRS = {CHECKPOINTS, "wandb", ".hydra", "__pycache__", ".git"}


@dataclass
class Study:
    jobs: pd.DataFrame
    long: pd.DataFrame
    label_props: dict[str, list[str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # outside models evaluated as references (read/external.py): label, metric, value, ...
    externals: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the final validation loss per bucket (read/breakdown.py), with the job columns of `long`
    breakdown: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def included_jobs(self) -> pd.DataFrame:
        return self.jobs[self.jobs["included"]]

    @property
    def excluded_jobs(self) -> pd.DataFrame:
        return self.jobs[~self.jobs["included"]]


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


def exclusion_reason(results: dict) -> str:
    """Empty string when the job is complete and comparable, else why it is left out."""
    status = results.get("status")
    if status != COMPLETED:
        return results.get("error") or f"not completed (status={status})"
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
        # the output head (conf/output); records older than the axis had the untied head
        "output": results.get("output") or "untied",
        "model": results.get("model"),
        "seed": results.get("seed"),
        "code_width": results.get("code_width"),
        "status": results.get("status"),
        "error": results.get("error"),
        "schema_version": results.get("schema_version"),
        "tokens_seen": results.get("tokens_seen"),
        "train_seconds": results.get("train_seconds"),
        "data": (results.get("data") or {}).get("name"),
        # common random numbers: runs of different variants at one seed may be paired (fixedcode_study.analysis.stats.pairing)
        "crn": is_crn(results),
        "flops_per_token": recorded_flops_per_token(results),
        # the training source the run was computed with (results.json fingerprint.code_sha)
        "code_sha": ((results.get("fingerprint") or {}).get("code_sha") or "")[:12] or None,
        # what the probes and samples of the job must have measured to count (read/probes.py staleness)
        "fingerprint_sha": (results.get("fingerprint") or {}).get("sha"),
        "finished_at": results.get("finished_at"),
        # a job linked from a completed job of another study with the same fingerprint (record/reuse.py)
        "reused_from": (results.get("reused_from") or {}).get("job_dir") if isinstance(
            results.get("reused_from"), dict) else None,
    }
    for section in ("input_props", "output_props", "params", "data", "final", "init"):
        value = results.get(section)
        flatten(section, value if isinstance(value, dict) else {}, rec)
    rec["reason"] = exclusion_reason(results)
    rec["included"] = rec["reason"] == ""
    return rec


def recorded_flops_per_token(results: dict) -> float:
    """Training FLOPs per token when the record carries them (a number, or accounting's dict with
    'total'); NaN otherwise."""
    for value in (results.get("flops_per_token"), (results.get("plan") or {}).get("flops_per_token")):
        if isinstance(value, dict):
            value = value.get("total")
        if _finite(value):
            return float(value)
    return math.nan


def read_curves(job_dir: Path, notes: list[str], run: str) -> pd.DataFrame | None:
    path = job_dir / METRICS_FILE
    if not path.is_file():
        return None
    try:
        curves = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        notes.append(f"{run}: {METRICS_FILE} unreadable ({type(exc).__name__}); curves omitted")
        return None
    missing = [c for c in CURVE_COLUMNS if c not in curves.columns]
    if missing:
        notes.append(f"{run}: {METRICS_FILE} lacks columns {missing}; curves omitted")
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
        return unreadable_record(run, job_dir, f"unreadable {RESULTS_FILE} ({type(exc).__name__}: {first_line})"), []
    return results_to_frames(results, run, job_dir, read_curves(job_dir, notes, run))


def results_to_frames(results: dict, run: str, job_dir: Path,
                      curves: pd.DataFrame | None) -> tuple[dict, list[pd.DataFrame]]:
    """Shared by the run-directory and W&B sources: results dict + curves -> record + long rows."""
    rec = job_record(results, run, job_dir)
    rec["_breakdown"] = breakdown_rows(results, run)
    config = results.get("config")
    rec["_config_flat"] = flatten("", config, {}) if isinstance(config, dict) else {}
    # How the lm-eval numbers were produced: an evaluation added after training is not in the
    # training config, and pooling a limit=100 smoke test with a full run must not go unnoticed.
    ev = results.get("eval") or {}
    if ev.get("tasks"):
        for key in ("limit", "num_fewshot", "dtype", "data_dir"):
            rec["_config_flat"][f"lm_eval_run.{key}"] = (ev.get("settings") or {}).get(key)
        rec["_eval_settings"] = ev.get("settings") or {}  # compared with external references' settings
        rec["_config_flat"]["lm_eval_run.version"] = ev.get("lm_eval_version")
    frames = []
    last_step = np.nan
    if curves is not None and len(curves):
        frames.append(curves)
        last_step = curves["step"].max()
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


def attach_job_columns(long: pd.DataFrame, jobs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Copy job-level columns onto every long row. Equivalent to a left merge on ``run`` but done
    by integer codes: a string merge over ~10^6 curve rows took seconds on a 2-core machine."""
    codes, runs = pd.factorize(long["run"])
    per_job = jobs.drop_duplicates("run").set_index("run").reindex(runs)
    # .array.take keeps each column's dtype (no object -> arrow-string re-conversion per row)
    added = {col: per_job[col].array.take(codes) for col in columns}
    return long.assign(**added)


@dataclass
class Collected:
    """Raw material from one source (run directories or W&B), before cross-job labelling."""
    records: list[dict] = field(default_factory=list)
    frames: list[pd.DataFrame] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    externals: list[pd.DataFrame] = field(default_factory=list)
    external_settings: dict[str, dict] = field(default_factory=dict)
    read: frozenset[Path] = frozenset()  # job dirs and external records already read (resolved paths)

    def __add__(self, other: Collected) -> Collected:
        return Collected(self.records + other.records, self.frames + other.frames,
                         self.sources + other.sources, self.notes + other.notes, self.externals + other.externals,
                         {**self.external_settings, **other.external_settings}, self.read | other.read)


def build_study(collected: Collected) -> Study:
    """Records + long pieces -> Study with variant labels and job columns on every long row."""
    records, frames, notes = collected.records, collected.frames, list(collected.notes)
    if not records:
        raise AnalysisError("no jobs found under " + ", ".join(collected.sources) + f" (looked for {RESULTS_FILE})")
    configs = {r["run"]: r.get("_config_flat", {}) for r in records}
    eval_settings = {r["run"]: r["_eval_settings"] for r in records if "_eval_settings" in r}
    jobs = pd.DataFrame.from_records([{k: v for k, v in r.items()
                                       if k not in ("_config_flat", "_eval_settings", "_breakdown")}
                                      for r in records])
    for col in ("input", "model", "seed", "data", "code_width", "flops_per_token"):
        if col not in jobs:
            jobs[col] = np.nan
    jobs["included"] = jobs["included"].astype(bool)
    jobs["crn"] = jobs["crn"].fillna(False).astype(bool) if "crn" in jobs else False
    jobs = add_tuned_columns(jobs, configs)
    seeds = pd.to_numeric(jobs["seed"], errors="coerce")
    if (seeds.dropna() % 1 == 0).all():
        jobs["seed"] = seeds.astype("Int64")  # integer seeds print as 1, not 1.0, next to NaN ones
    # Grouping keys must never be NaN (NaN != NaN would silently drop rows from comparisons).
    jobs["model"] = jobs["model"].astype(object).where(jobs["model"].notna(), "<unknown>")
    jobs["data"] = jobs["data"].astype(object).where(jobs["data"].notna(), "<unknown>")
    jobs, split_notes = split_contexts(jobs, configs)  # a compute ladder: sizes and budgets are contexts
    notes.extend(split_notes)
    if split_notes:
        jobs = ladder_order(jobs)
    jobs, label_props = assign_variants(jobs)
    jobs = exclude_repeated_seeds(jobs, notes)
    reused = int(jobs.loc[jobs["included"], "reused_from"].notna().sum()) if "reused_from" in jobs else 0
    if reused:
        notes.append(f"{reused} included job(s) were not trained in their own study: each reuses a completed job "
                     "with the same fingerprint (settings and training source) from another study, linked rather "
                     f"than retrained ({RESULTS_FILE} reused_from; tables/jobs.csv).")
    empty = pd.DataFrame({"step": pd.Series(dtype=float), "tokens": pd.Series(dtype=float),
                          "metric": pd.Series(dtype=object), "value": pd.Series(dtype=float),
                          "kind": pd.Series(dtype=object), "stderr": pd.Series(dtype=float),
                          "run": pd.Series(dtype=object)})
    long = pd.concat([empty, *frames], ignore_index=True) if frames else empty
    prop_cols = [c for c in jobs.columns if c.startswith("input_props.")]
    long = attach_job_columns(long, jobs, JOB_KEY_COLUMNS[1:] + ["code_width"] + prop_cols)
    notes.extend(pooled_config_notes(configs, jobs))
    labelled = tuple(c for cols in label_props.values() for c in cols if c.startswith(TUNED_PREFIXES))
    notes.extend(setting_notes(configs, jobs, labelled))
    with_curves = set(long.loc[long["kind"] == "curve", "run"])
    no_curves = [r for r in jobs.loc[jobs["included"], "run"] if r not in with_curves]
    if no_curves:
        shown = "; ".join(no_curves[:5]) + (f"; ... ({len(no_curves) - 5} more, see tables/jobs.csv)"
                                             if len(no_curves) > 5 else "")
        notes.append(f"{len(no_curves)} included job(s) have no per-step metrics, so they appear in tables but "
                     "not in curve figures: " + shown)
    externals = pd.concat(collected.externals, ignore_index=True) if collected.externals else pd.DataFrame()
    if collected.external_settings:
        included_runs = set(jobs.loc[jobs["included"], "run"])
        notes.extend(external_notes(collected.external_settings,
                                    [s for run, s in eval_settings.items() if run in included_runs]))
    buckets = breakdown_frame([row for r in records for row in r.get("_breakdown", [])])
    buckets = attach_job_columns(buckets, jobs, JOB_KEY_COLUMNS[1:] + ["variant_order"])
    return Study(jobs=jobs, long=long, label_props=label_props, sources=collected.sources, notes=notes,
                 externals=externals, breakdown=buckets)


def add_tuned_columns(jobs: pd.DataFrame, configs: dict[str, dict]) -> pd.DataFrame:
    """Optimizer settings a tuning sweep varies (optim.lr, optim.warmup_*), copied from the resolved
    config onto the job rows; variants.assign_variants names arms by them when they vary."""
    keys = sorted({k for flat in configs.values() for k in flat if k.startswith(TUNED_PREFIXES)})
    for key in keys:
        jobs[key] = jobs["run"].map(lambda run, key=key: configs.get(run, {}).get(key))
    return jobs


def exclude_repeated_seeds(jobs: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """Count each (model, data, variant, seed) once.

    Studies share reference arms (learned and binary16 seeds 1-3 run in main, code_width,
    controls, ...), and on CPU those runs are bitwise identical; a study run after another links
    them instead of retraining (results.json `reused_from`). Pooling them as separate seeds would
    shrink standard errors by about sqrt(2) and inflate significance, so only one is kept: a job
    that was trained before one that reuses another's weights, then the first by run path. The
    others are listed as excluded with the run they repeat.
    """
    key = ["model", "data", "variant", "seed"]
    reuse = jobs["reused_from"].notna() if "reused_from" in jobs else pd.Series(False, index=jobs.index)
    inc = jobs[jobs["included"]].assign(_reuse=reuse).sort_values(["_reuse", "run"]).drop(columns="_reuse")
    repeated = inc[inc.duplicated(subset=key, keep="first")]
    if repeated.empty:
        return jobs
    first = inc.drop_duplicates(subset=key, keep="first").set_index(key)["run"]
    jobs = jobs.copy()
    for idx, row in repeated.iterrows():
        kept = first.loc[tuple(row[k] for k in key)]
        jobs.loc[idx, "included"] = False
        jobs.loc[idx, "reason"] = f"repeats {kept} (same variant, model, data and seed): counted once"
    notes.append(f"{len(repeated)} job(s) repeat a (variant, model, data, seed) already included from another "
                 "directory and were counted once; see Excluded jobs.")
    return jobs


# Keys that legitimately differ between seeds of one variant (seeds, output paths, run names).
_POOLING_IGNORED = ("seed", "dir", "path", "name", "wandb", "hydra", "job", "sweep", "output", "out_root", "tags")


# How a job's lm-eval numbers were produced (results_to_frames): only evaluated jobs carry these keys.
EVAL_RUN_PREFIX = "lm_eval_run."


def _values(flat: list[dict], key: str) -> set[str]:
    # An lm-eval setting is compared among the jobs that were evaluated: a job without downstream
    # numbers is not in the downstream row at all, so its missing key is not a different setting.
    among = [f for f in flat if key in f] if key.startswith(EVAL_RUN_PREFIX) else flat
    return {json.dumps(f.get(key), sort_keys=True, default=str) for f in among}


def _differing_keys(flat: list[dict], skip_prefixes: tuple[str, ...] = ()) -> list[str]:
    keys = set().union(*flat)
    return sorted(k for k in keys
                  if not any(tok in k.lower() for tok in _POOLING_IGNORED) and not k.startswith(skip_prefixes)
                  and len(_values(flat, k)) > 1)


def _evaluated(flat: dict) -> bool:
    return f"{EVAL_RUN_PREFIX}version" in flat


def _shown(keys: list[str]) -> str:
    return ", ".join(keys[:6]) + (" ..." if len(keys) > 6 else "")


def pooled_config_notes(configs: dict[str, dict], jobs: pd.DataFrame) -> list[str]:
    """Warn when jobs pooled into one table row ran with different resolved configs."""
    notes = []
    included = jobs[jobs["included"]]
    for (model, variant, _data), group in included.groupby(["model", "variant", "data"], dropna=False):
        flat = [configs.get(run, {}) for run in group["run"]]
        if len(flat) >= 2 and any(flat) and (differing := _differing_keys(flat)):
            notes.append(f"row {model} / {variant} pools jobs whose resolved configs differ in: {_shown(differing)}")
        limits = sorted({f[f"{EVAL_RUN_PREFIX}limit"] for f in flat
                         if _evaluated(f) and f.get(f"{EVAL_RUN_PREFIX}limit") is not None}, key=str)
        if limits:
            notes.append(f"row {model} / {variant}: downstream cells scored on at most {', '.join(map(str, limits))} "
                         "examples per task (eval.limit), not on the full tasks: a smoke test")
        evaluated = sum(map(_evaluated, flat))
        if 0 < evaluated < len(flat):
            notes.append(f"row {model} / {variant}: its downstream (lm-eval) cells are from {evaluated} of its "
                         f"{len(flat)} jobs; the others were not evaluated (its validation cells are from all {len(flat)})")
    return notes


def setting_notes(configs: dict[str, dict], jobs: pd.DataFrame, labelled: tuple[str, ...] = ()) -> list[str]:
    """Warn when rows compared with each other (same model and data) ran under different settings
    other than the input variant, e.g. a different token budget: their differences are then confounded.
    ``labelled`` settings (a tuning sweep's optim.lr) name the rows themselves, so they are not warned about."""
    notes = []
    included = jobs[jobs["included"]]
    for (model, data), group in included.groupby(["model", "data"], dropna=False):
        flat = [configs.get(run, {}) for run in group["run"]]
        if len(flat) >= 2 and any(flat) and (differing := _differing_keys(
                flat, ("input.", "input_props.", "output.", "output_props.", *labelled))):
            notes.append(f"jobs compared within model={model}, data={data} differ in settings other than the input "
                         f"variant and seed: {_shown(differing)}; differences between rows may reflect these")
    return notes


def collect_run_dirs(roots: list[str | Path], already: Collected | None = None) -> Collected:
    """Discover and read every job under ``roots``, except what ``already`` has read.

    ``already`` lets a second reading add to a first without reading its jobs again: the probe
    section's study (probe_runs=) is the study's jobs plus the probe-only arms, and the probe roots
    usually hold the study's own folder (`multirun/main probe_runs=multirun`).
    """
    skip = already.read if already is not None else frozenset()
    job_dirs, orphans = discover(roots)
    job_dirs, orphans = [d for d in job_dirs if d not in skip], [d for d in orphans if d not in skip]
    collected = Collected(sources=[str(r) for r in roots])
    for job_dir in job_dirs:
        rec, job_frames = read_job(job_dir, collected.notes)
        collected.records.append(rec)
        collected.frames.extend(job_frames)

    externals, settings, external_paths = read_externals(roots, collected.notes, skip)
    collected.read = frozenset(job_dirs) | frozenset(orphans) | frozenset(external_paths)
    if len(externals):
        collected.externals.append(externals)
        collected.external_settings.update(settings)
    for orphan in orphans:
        collected.records.append(unreadable_record(display_path(orphan), orphan, f"no {RESULTS_FILE} (job never "
                                                   "finished writing it)") | {"status": f"missing {RESULTS_FILE}"})
    return collected


def load_run_dirs(roots: list[str | Path]) -> Study:
    return build_study(collect_run_dirs(roots))
