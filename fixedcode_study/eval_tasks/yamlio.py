"""Atomic writers for generated task YAMLs and derived data files."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml


def write_text_atomic(path: Path, text: str) -> Path:
    """Temporary file + rename: a reader sees the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_task_yaml(path: Path, config: Mapping[str, Any], functions: Mapping[str, str] | None = None) -> Path:
    """A task YAML; `functions` become `key: !function module.name` lines (lm-eval's tag for code)."""
    text = yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, width=1000)
    for key, target in (functions or {}).items():
        text += f"{key}: !function {target}\n"
    return write_text_atomic(path, text)


def write_jsonl_atomic(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    return write_text_atomic(path, "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows))
