"""Task definitions for evaluation: official lm-eval tasks on local mirrors, and built-in tasks.

`write_tasks` turns a list of task names into a folder of generated lm-eval task YAMLs (for
`TaskManager(include_path=...)` or `lm_eval --include_path`):
  * a built-in task name (builtin.BUILTIN_TASKS) -> a task over files derived from the data cache;
  * an official name with a mirror folder (eval.data_dir) -> the official task reading the mirror;
  * an official name without a mirror -> nothing written; lm-eval's own definition is used
    (which downloads from the Hugging Face Hub; `needs_official_index` tells the caller).
YAMLs are generated at run time because they hold absolute paths (see mirror.py).
`unknown_tasks` names the tasks that are none of these three (lm-eval's own index is read only then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .builtin import BUILTIN_TASKS, write_builtin_task
from .mirror import MIRROR_TASKS, OFFICIAL_TASKS_DIR, write_mirror_task

__all__ = ["BUILTIN_TASKS", "MIRROR_TASKS", "TaskFolder", "missing_include_paths", "unknown_tasks", "write_tasks"]


@dataclass
class TaskFolder:
    include_path: Path
    tasks: list[str]
    needs_official_index: bool  # some task is lm-eval's own (read from the Hub)
    files: list[Path]


def write_tasks(
    tasks: Sequence[str],
    out_dir: str | Path,
    data_dir: str | Path | None = None,
    prepared_root: str | Path | None = None,
    builtin_settings: Mapping[str, Any] | None = None,
) -> TaskFolder:
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(data_dir).expanduser().resolve() if data_dir else None
    if data_dir is not None and not data_dir.is_dir():
        raise ConfigError("eval.data_dir", f"{data_dir} is not a directory",
                          "point it at a mirror folder (one sub-folder per task) or set it to null")
    files: list[Path] = []
    official = False
    for task in tasks:
        if task in BUILTIN_TASKS:
            if prepared_root is None:
                raise ConfigError("eval.prepared_root", f"built-in task {task} needs the prepared data cache",
                                  "pass eval.prepared_root=<the data cache folder of the model's corpus, "
                                  "e.g. ~/.cache/fixedcode_study/shakespeare-<key>>")
            files += write_builtin_task(task, Path(prepared_root).resolve(), builtin_settings or {}, out_dir)
        elif data_dir is not None:
            if task not in MIRROR_TASKS:
                raise ConfigError("eval.tasks", f"{task} has no mirror definition",
                                  f"with eval.data_dir use {', '.join(MIRROR_TASKS)} or {', '.join(BUILTIN_TASKS)}")
            files += write_mirror_task(task, data_dir, out_dir)
        else:
            official = True
    return TaskFolder(out_dir, list(tasks), official, files)


def missing_include_paths(argv: Sequence[str]) -> list[str]:
    """The `--include_path` folders of an lm-eval command line that do not exist. lm-eval skips such
    a folder without a word and looks its tasks up on the Hub instead, which offline ends in a
    ConnectionError traceback (`fixedcode eval-tasks OUT_DIR ...` makes the folder)."""
    paths = [b for a, b in zip(argv, argv[1:]) if a == "--include_path"]
    paths += [a.split("=", 1)[1] for a in argv if a.startswith("--include_path=")]
    return [p for p in paths if not Path(p).expanduser().is_dir()]


def unknown_tasks(tasks: Sequence[str]) -> list[str]:
    """The names that are neither built-in, nor mirrored, nor one of lm-eval's own tasks, groups or tags.

    lm-eval's index parses every task YAML it ships (most of lm-eval's start-up). Every name it knows is
    spelled in one of the files of its tasks folder (a YAML or a file one includes; checked in
    tests/evaluation/test_model_sources.py), so a name no file spells is unknown without it (a plain text
    scan, far quicker); the index decides the rest."""
    rest = [t for t in tasks if t not in BUILTIN_TASKS and t not in MIRROR_TASKS]
    if not rest:
        return []
    texts = official_task_texts()
    spelled = {t for t in rest if any(t in text for text in texts)}
    known: set[str] = set()
    if spelled:
        from lm_eval.tasks import TaskManager

        known = set(TaskManager().all_tasks)
    return [t for t in rest if t not in known]


def official_task_texts() -> list[str]:
    """The text of every file in lm-eval's tasks folder (YAMLs, the files they include, READMEs, code)."""
    return [f.read_text(encoding="utf-8", errors="ignore") for f in OFFICIAL_TASKS_DIR.rglob("*")
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".jpg", ".png")]
