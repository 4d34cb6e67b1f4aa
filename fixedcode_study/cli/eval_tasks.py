"""`fixedcode eval-tasks OUT_DIR --tasks A,B [--data-dir DIR] [--prepared-root DIR]`: task YAMLs for lm-eval.

Writes task YAMLs for `lm_eval --include_path` (the folder holds absolute paths; regenerate it
when the mirror or the data cache moves).

    fixedcode eval-tasks OUT_DIR --tasks hellaswag,wikitext,mmlu --data-dir ../shared/data/eval
    fixedcode eval-tasks OUT_DIR --tasks fixedcode_heldout_ppl \
        --prepared-root ~/.cache/fixedcode_study/shakespeare-<key>
    fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH \
        --include_path OUT_DIR --tasks hellaswag,wikitext,mmlu

`python -m fixedcode_study.eval_tasks` is the same command. The work is evaluation/tasks.py's.
"""

from __future__ import annotations

from typing import Any

from ..evaluation.tasks import write_tasks
from .args import REQUIRED, Command, Key, exit_with, run_command

COMMAND = Command("eval-tasks", __doc__, keys=(
    Key("out_dir", REQUIRED, "folder the task YAMLs go to", positional=True),
    Key("tasks", REQUIRED, "comma-separated task names", flag="--tasks"),
    Key("data_dir", None, "offline mirror folder (one sub-folder per task)", flag="--data-dir", kind=str),
    Key("prepared_root", None, "data cache folder, for the built-in tasks", flag="--prepared-root", kind=str),
))


def eval_tasks(values: dict[str, Any], _overrides: list[str]) -> int:
    tasks = [t for t in values["tasks"].split(",") if t]
    folder = write_tasks(tasks, values["out_dir"], values["data_dir"], values["prepared_root"])
    print(f"wrote {len(folder.files)} task files to {folder.include_path}")
    if folder.needs_official_index:
        print("note: some tasks have no mirror here and will be read from the Hugging Face Hub")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, eval_tasks)


if __name__ == "__main__":
    exit_with(main())
