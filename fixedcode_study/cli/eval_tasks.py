"""`fixedcode eval-tasks OUT_DIR --tasks A,B [--data-dir DIR] [--prepared-root DIR]`: task YAMLs for lm-eval.

Writes task YAMLs for `lm_eval --include_path` (the folder holds absolute paths; regenerate it
when the mirror or the data cache moves).

    fixedcode eval-tasks OUT_DIR --tasks hellaswag,wikitext,mmlu --data-dir ../shared/data/eval
    fixedcode eval-tasks OUT_DIR --tasks fixedcode_heldout_ppl --prepared-root ~/.cache/fixedcode_study/shakespeare-<key>
    fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH --include_path OUT_DIR --tasks hellaswag,wikitext,mmlu

`python -m fixedcode_study.eval_tasks` is the same command. The work is evaluation/tasks/'s.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ..errors import ConfigError
from ..evaluation.tasks import BUILTIN_TASKS, MIRROR_TASKS, unknown_tasks, write_tasks
from .args import REQUIRED, Command, Key, exit_with, run_command

TASK_NAMES = (f"the built-in tasks {', '.join(BUILTIN_TASKS)} (they need --prepared-root: the data cache of the "
              f"model's corpus); with --data-dir, the mirrored tasks {', '.join(MIRROR_TASKS)}; without it, any "
              "lm-eval task name, whose YAML is lm-eval's own (read from the Hugging Face Hub; "
              "`fixedcode lm-eval ls tasks` lists them)")
COMMAND = Command("eval-tasks", f"{__doc__.rstrip()}\n\n{textwrap.fill(f'--tasks takes {TASK_NAMES}.', 100)}\n", keys=(
    Key("out_dir", REQUIRED, "folder the task YAMLs go to", positional=True),
    Key("tasks", REQUIRED, "comma-separated task names", flag="--tasks"),
    Key("data_dir", None, "offline mirror folder (one sub-folder per task)", flag="--data-dir", kind=str),
    Key("prepared_root", None, "data cache folder, for the built-in tasks", flag="--prepared-root", kind=str),
))


def check_tasks(tasks: list[str], values: dict[str, Any]) -> None:
    """Every name is a task this command can write (or leave to lm-eval), before anything is written."""
    if not tasks:
        raise ConfigError("--tasks", "names no task", f"pass --tasks A,B with A, B among {TASK_NAMES}")
    builtin = [t for t in tasks if t in BUILTIN_TASKS]
    if builtin and values["prepared_root"] is None:
        raise ConfigError("--prepared-root", f"built-in task {builtin[0]} needs the prepared data cache",
                          "pass --prepared-root <the data cache folder of the model's corpus>, e.g. "
                          "~/.cache/fixedcode_study/shakespeare-<key>")
    if values["data_dir"]:  # every task is then read from the mirror, or built in
        unknown = [t for t in tasks if t not in BUILTIN_TASKS and t not in MIRROR_TASKS]
        what = "has no mirror definition"
    else:
        unknown, what = unknown_tasks(tasks), "is not a task"
    if unknown:
        raise ConfigError("--tasks", f"{unknown[0]} {what}", f"use {TASK_NAMES}")


def eval_tasks(values: dict[str, Any], _overrides: list[str]) -> int:
    tasks = [t.strip() for t in values["tasks"].split(",") if t.strip()]
    check_tasks(tasks, values)
    folder = write_tasks(tasks, values["out_dir"], values["data_dir"], values["prepared_root"])
    print(f"wrote {len(folder.files)} task files to {folder.include_path}")
    if folder.needs_official_index:
        print("note: some tasks have no mirror here and will be read from the Hugging Face Hub")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, eval_tasks)


if __name__ == "__main__":
    exit_with(main())
