"""Writers for generated task YAMLs and derived data files (atomic: record/atomic.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ...record import atomic


def write_task_yaml(path: Path, config: Mapping[str, Any], functions: Mapping[str, str] | None = None) -> Path:
    """A task YAML; `functions` become `key: !function module.name` lines (lm-eval's tag for code)."""
    text = yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, width=1000)
    for key, target in (functions or {}).items():
        text += f"{key}: !function {target}\n"
    atomic.write_text(path, text)
    return path


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    atomic.write_text(path, "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows))
    return path
