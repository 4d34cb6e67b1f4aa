"""Per-job results: `results.json` is the source of truth for every number analysis reports.

Written atomically (temporary file + rename): a job that dies mid-write leaves the previous
version, never a truncated file. Status moves running -> completed | failed | preempted
(preempted: stopped by a signal after saving checkpoints/last.ckpt; re-running resumes it).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"


def write_json_atomic(path: str | os.PathLike, data: Mapping[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_results(job_dir: str | os.PathLike) -> dict[str, Any] | None:
    path = Path(job_dir) / RESULTS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None
    return data if isinstance(data, dict) else None


def is_completed(job_dir: str | os.PathLike) -> bool:
    """The completion marker: results.json says completed AND holds the final numbers AND the final
    weights it points to exist. Anything less (a crash, a kill, a hand-edited file) is re-run or
    resumed rather than trusted."""
    res = read_results(job_dir)
    if not res or res.get("status") != "completed":
        return False
    final = res.get("final")
    if not isinstance(final, dict) or not isinstance(final.get("val_loss"), (int, float)):
        return False
    ckpt = res.get("checkpoint")
    return bool(ckpt) and (Path(job_dir) / ckpt / "model.safetensors").exists()


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("fixedcode-study", "torch", "lightning", "hydra-core", "wandb", "tokenizers", "lm-eval"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out
