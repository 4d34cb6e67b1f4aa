"""A job's fingerprint: what it computes, as a hash, so a stored result is never reused under
other settings or other code.

A job directory is found by its key (the override text, config.job_key), which says nothing about
the YAML defaults or the code behind it. The fingerprint closes that gap. It covers

  settings  every resolved config value that can change a number (model, input, data, train,
            optim, seed, trainer precision and accelerator, ...), flattened to dotted keys, plus
            the batch plan's world-size independent facts (tokens per optimizer step, steps);
  code      a hash of the package source that computes a trained model (CODE_PATHS below),
            with the package version, git commit and dirty flag for humans.

Settings that cannot change a number are out of both the job key and the fingerprint, from one
list (`job_key_ignore` in conf/config.yaml): the study name, output root, force, logger, eval,
checkpoint cadence, device and node counts, the data cache location. A job therefore resumes on
another GPU count, and `eval=...` on a finished job evaluates it instead of retraining it.

results.json and every Lightning checkpoint carry the fingerprint; a re-run whose fingerprint
differs is refused with the differing keys named (training/job.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The package source that decides what a trained model computes. CLIs, analysis, evaluation and
# the record's own bookkeeping are left out: editing them cannot change a trained weight.
CODE_PATHS = ("model.py", "build.py", "accounting.py", "inputs", "heads", "data", "spec", "training")
# Logging, input checks, evaluation settings and describe's tables: they decide how a job is shown
# and checked, never what it computes. (The terminal, console.py, and the launcher, studies/, are
# outside CODE_PATHS altogether.)
CODE_EXCLUDED = ("training/loggers.py", "spec/settings.py", "spec/evaluation.py", "spec/description.py")


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c": [1, 2]} -> {"a.b": 1, "c": [1, 2]} (lists stay values)."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    return {prefix[:-1]: node}


def ignored(key: str, ignore: Iterable[str]) -> bool:
    """`eval` ignores `eval.limit`; `trainer.devices` ignores only itself."""
    return any(key == p or key.startswith(p + ".") for p in ignore)


def identity_settings(config: Mapping[str, Any], ignore: Iterable[str],
                      plan: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The resolved settings that define the job's numbers, as sorted dotted keys."""
    ignore = [str(p) for p in ignore] + ["job_key_ignore"]
    flat = {k: v for k, v in flatten(config).items() if not ignored(k, ignore)}
    for key, value in (plan or {}).items():
        flat[f"plan.{key}"] = value
    return dict(sorted(flat.items()))


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    return value


def sha(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def code_sha() -> str:
    """sha256 over (relative path, bytes) of every .py file under CODE_PATHS, in sorted order."""
    digest = hashlib.sha256()
    for entry in CODE_PATHS:
        path = PACKAGE_DIR / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            if str(f.relative_to(PACKAGE_DIR)) in CODE_EXCLUDED:
                continue
            digest.update(str(f.relative_to(PACKAGE_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """Commit and dirty flag of the checkout the package runs from; None outside a checkout."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return {"commit": commit, "dirty": bool(status)}


def package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fixedcode-study")
    except PackageNotFoundError:
        return None


def fingerprint(config: Mapping[str, Any], ignore: Iterable[str], plan: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record's `fingerprint`: {"sha", "settings_sha", "code_sha", "settings", "code"}."""
    settings = identity_settings(config, ignore, plan)
    settings_sha, code = sha(settings), code_sha()
    return {
        "sha": sha({"settings": settings_sha, "code": code}),
        "settings_sha": settings_sha,
        "code_sha": code,
        "settings": settings,
        "code": {"version": package_version(), **git_state()},
    }


def differences(stored: Mapping[str, Any], current: Mapping[str, Any], limit: int = 6) -> list[str]:
    """Human-readable differences between two fingerprints: 'train.tokens: 524288 -> 1048576'."""
    if stored.get("sha") == current.get("sha"):
        return []
    old, new = stored.get("settings") or {}, current.get("settings") or {}
    out = [f"{k}: {_short(old.get(k, '<unset>'))} -> {_short(new.get(k, '<unset>'))}"
           for k in sorted(set(old) | set(new)) if old.get(k, "<unset>") != new.get(k, "<unset>")]
    if stored.get("code_sha") != current.get("code_sha"):
        was, now = stored.get("code") or {}, current.get("code") or {}
        out.append(f"code: the training source changed (source {str(stored.get('code_sha'))[:8]} at commit "
                   f"{_commit(was)} -> {str(current.get('code_sha'))[:8]} at {_commit(now)})")
    if not out:
        out.append("fingerprint format")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _commit(code: Mapping[str, Any]) -> str:
    commit = code.get("commit")
    if not commit:
        return "unknown"
    return commit[:10] + ("+dirty" if code.get("dirty") else "")
