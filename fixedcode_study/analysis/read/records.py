"""Fields of one record (results.json, external.json) as the readers use them: display paths, the
lm-eval metric rows with their stderr, and whether a run used common random numbers (the pairing
rule of stats/pairing.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ...record.jobdir import CHECKPOINTS, WANDB_DIR

CRN_SCHEME = "per_group_generators"  # results.json init.scheme of a run with common random numbers
_SKIP_DIRS = {CHECKPOINTS, WANDB_DIR, ".hydra", "__pycache__", ".git"}   # as job discovery prunes (read/runs.py)


def files_named(sources: list[str], name: str) -> list[Path]:
    """Every file called `name` below the run directories (compose.json, adapt.json: the records a study
    writes beside its jobs), job trees pruned as job discovery prunes them; sorted, each once."""
    found: set[Path] = set()
    for source in sources:
        if not Path(source).is_dir():
            continue  # a W&B source holds no files here
        for dirpath, dirnames, filenames in os.walk(source):
            if name in filenames:
                found.add((Path(dirpath) / name).resolve())
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
    return sorted(found)


def display_path(path: Path) -> str:
    """Path relative to the working directory when inside it (short, readable), else absolute."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def stderr_key(metric: str) -> str:
    """lm-eval's stderr name: 'acc' -> 'acc_stderr', 'exact_match,strict-match' -> 'exact_match_stderr,strict-match'."""
    name, sep, filt = metric.partition(",")
    return f"{name}_stderr{sep}{filt}"


def eval_rows(results: dict) -> list[dict]:
    """lm-eval metrics of the requested tasks (results.json eval.tasks) as long rows with their stderr.
    A ',none' filter suffix is dropped (raw lm-eval keys); other filters stay, they are distinct metrics.
    ``headline`` marks the suite's reported metrics (eval.headline); without a headline every metric is one.
    Comparisons test headline metrics only: a task's other metrics (byte_perplexity next to
    bits_per_byte) are transforms of the same number and would count twice in the Holm family."""
    ev = results.get("eval") or {}
    tasks = ev.get("tasks") or {}
    headline = ev.get("headline") if isinstance(ev.get("headline"), dict) else {}
    chosen = {(t, m.removesuffix(",none")) for t, ms in headline.items() if isinstance(ms, dict) for m in ms}
    rows = []
    for task, metrics in tasks.items():
        clean = {name.removesuffix(",none"): value for name, value in (metrics or {}).items()}
        for name, value in clean.items():
            if name.partition(",")[0].endswith("_stderr") or not _finite(value):
                continue
            stderr = clean.get(stderr_key(name))
            rows.append({"kind": "eval", "metric": f"{task}/{name}", "value": float(value),
                         "stderr": float(stderr) if _finite(stderr) else np.nan,
                         "headline": not chosen or (task, name) in chosen})
    return rows


def is_crn(results: dict) -> bool:
    """True when a results.json dict records common random numbers. Tolerates any shape."""
    init = results.get("init") if isinstance(results, dict) else None
    return isinstance(init, dict) and init.get("scheme") == CRN_SCHEME


