"""Read the study's runs from the W&B public API into the same frames as run directories.

Each W&B run is turned into a results.json-shaped dict, so everything downstream is shared:
1. If the run's summary holds ``results`` (results.json minus ``config``), it is used as is.
2. Otherwise fields are assembled as fixedcode_study.train logs them: run config = resolved
   Hydra config plus ``input_props`` and ``params`` (``input.name``, ``model.name``, ``seed``,
   ``name`` = sweep, ``data.name``); run name = ``<sweep>/<job_key>``, group = sweep; summary =
   ``final/val_loss|val_ppl|val_bpb`` (falling back to the last ``val/*``), ``tokens_seen``,
   ``eval/<task>/<metric>[_stderr]``; history = curves under the metrics.csv names with
   ``tokens`` and Lightning's ``trainer/global_step``. W&B does not carry data.unigram_val_ppl
   unless the summary has ``data/unigram_val_ppl``, so the reference line may be missing.
W&B run state maps to status: finished -> completed, running -> running, else failed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from .runs import Collected, results_to_frames

CURVE_METRICS = ("train/loss", "train/lr", "train/tokens_per_second", "val/loss", "val/ppl", "val/bpb")
STATE_TO_STATUS = {"finished": "completed", "running": "running"}
API_TIMEOUT_S = 20


def plain(value):
    """W&B summary/config objects -> plain dicts/lists (they are dict-like but not dicts)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _first(mapping: Mapping, *keys, default=None):
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return default


def _prefixed(summary: Mapping, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in summary.items() if k.startswith(prefix) and not isinstance(v, Mapping)}


def _eval_section(summary: Mapping) -> dict | None:
    tasks: dict[str, dict] = {}
    for key, value in _prefixed(summary, "eval/").items():
        task, _, metric = key.rpartition("/")
        if task:
            tasks.setdefault(task, {})[metric] = value
    return {"tasks": tasks} if tasks else None


def results_from_wandb(name: str, group: str | None, state: str, config: Mapping, summary: Mapping) -> dict:
    """A results.json-shaped dict for one W&B run (pure: plain dicts in, dict out)."""
    config, summary = plain(config), plain(summary)
    status = STATE_TO_STATUS.get(state, "failed")
    if isinstance(summary.get("results"), dict):
        results = dict(summary["results"])
        results.setdefault("config", config)
        if status != "completed":  # the W&B state is more current than a results dict logged earlier
            results["status"], results["error"] = status, results.get("error") or f"W&B run state: {state}"
        return results
    input_node = config.get("input") if isinstance(config.get("input"), dict) else {}
    input_name_if_plain = config.get("input") if isinstance(config.get("input"), str) else None
    model_node = config.get("model")
    input_props = config.get("input_props") if isinstance(config.get("input_props"), dict) else {
        k: v for k, v in input_node.items() if k != "name" and not isinstance(v, (dict, list))}
    params = config.get("params") if isinstance(config.get("params"), dict) else _prefixed(summary, "params/")
    data_node = config.get("data") if isinstance(config.get("data"), dict) else {}
    return {
        "status": status,
        "error": None if status != "failed" else f"W&B run state: {state}",
        "sweep": group or config.get("name"),
        "job_key": name.rpartition("/")[2],
        "input": _first(input_node, "name", "type", default=input_name_if_plain),
        "input_props": input_props,
        # the output head (conf/output); runs older than the axis had the untied head
        "output": _first(config.get("output") if isinstance(config.get("output"), dict) else {}, "name",
                         default=config.get("output") if isinstance(config.get("output"), str) else "untied"),
        "seed": config.get("seed"),
        "model": model_node.get("name") if isinstance(model_node, dict) else model_node,
        "code_width": input_props.get("code_width"),
        "params": params,
        "final": {
            "val_loss": _first(summary, "final/val_loss", "val/loss"),
            "val_ppl": _first(summary, "final/val_ppl", "val/ppl"),
            "val_bpb": _first(summary, "final/val_bpb", "val/bpb"),
        },
        "data": {"name": data_node.get("name")} | _prefixed(summary, "data/"),
        "tokens_seen": _first(summary, "tokens_seen", "tokens", "train/tokens"),
        "eval": _eval_section(summary),
        "config": config,
    }


def history_to_curves(rows: Iterable[Mapping], run: str) -> pd.DataFrame | None:
    """W&B history rows (one dict per log call) -> metrics.csv-shaped long rows."""
    out = []
    for row in rows:
        step = _first(row, "trainer/global_step", "step", "_step")
        tokens = _first(row, "tokens", "train/tokens", default=np.nan)
        for metric in CURVE_METRICS:
            value = row.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append((step, tokens, metric, float(value)))
    if not out:
        return None
    curves = pd.DataFrame(out, columns=["step", "tokens", "metric", "value"])
    return curves.assign(kind="curve", stderr=np.nan, run=run)


def open_api():
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun"):
        raise AnalysisError(f"wandb= needs the online W&B API but WANDB_MODE={mode}; "
                            "unset it, or analyse the run directories instead")
    try:
        import wandb
    except ImportError as exc:
        raise AnalysisError("wandb= needs the wandb package (pip install wandb)") from exc
    try:
        return wandb.Api(timeout=API_TIMEOUT_S)
    except Exception as exc:  # wandb raises many types (UsageError, AuthenticationError, network errors)
        raise AnalysisError(_api_failure(exc)) from exc


def _api_failure(exc: Exception) -> str:
    detail = (str(exc).strip().splitlines() or [""])[0][:200]
    return (f"W&B API unavailable ({type(exc).__name__}: {detail}); run `wandb login` on a machine with "
            "network access, or analyse the run directories instead")


def collect_wandb(path: str, group: str | None = None) -> Collected:
    if path.count("/") != 1 or not all(path.split("/")):
        raise AnalysisError(f"wandb= expects ENTITY/PROJECT, got {path!r}")
    api = open_api()
    source = f"wandb:{path}" + (f" (group {group})" if group else "")
    collected = Collected(sources=[source])
    try:
        runs = list(api.runs(path, filters={"group": group} if group else None))
        for run in runs:
            run_ref = f"wandb:{path}/{run.id}"
            results = results_from_wandb(run.name, run.group, run.state, run.config, run.summary)
            curves = history_to_curves(run.scan_history(), run_ref)
            rec, frames = results_to_frames(results, run_ref, Path(run.name), curves)
            collected.records.append(rec)
            collected.frames.extend(frames)
    except AnalysisError:
        raise
    except Exception as exc:
        raise AnalysisError(_api_failure(exc)) from exc
    if not collected.records:
        raise AnalysisError(f"no W&B runs in {source}")
    return collected
