"""`fixedcode eval-tasks OUT_DIR tasks=A,B [data_dir=DIR] [prepared_root=DIR]`: task YAMLs for lm-eval.

Writes task YAMLs for `lm_eval --include_path` (the folder holds absolute paths; regenerate it
when the mirror or the data cache moves).

    fixedcode eval-tasks OUT_DIR tasks=hellaswag,wikitext,mmlu data_dir=../shared/data/eval
    fixedcode eval-tasks OUT_DIR tasks=fixedcode_heldout_ppl prepared_root=~/.cache/fixedcode_study/shakespeare-<key>
    fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH --include_path OUT_DIR --tasks hellaswag,wikitext,mmlu

The work is evaluation/tasks/'s.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..evaluation.tasks import BUILTIN_TASKS, MIRROR_TASKS, unknown_tasks, write_tasks
from .args import POSITIONAL, Command, exit_with, run_command

TASK_NAMES = (f"the built-in tasks {', '.join(BUILTIN_TASKS)} (they need prepared_root: the data cache of the "
              f"model's corpus); with data_dir, the mirrored tasks {', '.join(MIRROR_TASKS)}; without it, any "
              "lm-eval task name, whose YAML is lm-eval's own (read from the Hugging Face Hub; "
              "`fixedcode lm-eval ls tasks` lists them)")


@dataclass(frozen=True, kw_only=True)
class EvalTasksOptions:
    out_dir: str = field(metadata=POSITIONAL)
    """folder the task YAMLs go to"""
    tasks: str
    """comma-separated task names"""
    data_dir: str | None = None
    """offline mirror folder (one sub-folder per task)"""
    prepared_root: str | None = None
    """data cache folder, for the built-in tasks"""

    @property
    def task_names(self) -> list[str]:
        return [t.strip() for t in self.tasks.split(",") if t.strip()]

    def __post_init__(self) -> None:
        """Every name is a task this command can write (or leave to lm-eval), before anything is written."""
        tasks = self.task_names
        if not tasks:
            raise ConfigError("tasks", "names no task", f"pass tasks=A,B with A, B among {TASK_NAMES}")
        builtin = [t for t in tasks if t in BUILTIN_TASKS]
        if builtin and self.prepared_root is None:
            raise ConfigError("prepared_root", f"built-in task {builtin[0]} needs the prepared data cache",
                              "pass prepared_root=<the data cache folder of the model's corpus>, e.g. "
                              "~/.cache/fixedcode_study/shakespeare-<key>")
        if self.data_dir:  # every task is then read from the mirror, or built in
            unknown = [t for t in tasks if t not in BUILTIN_TASKS and t not in MIRROR_TASKS]
            what = "has no mirror definition"
        else:
            unknown, what = unknown_tasks(tasks), "is not a task"
        if unknown:
            raise ConfigError("tasks", f"{unknown[0]} {what}", f"use {TASK_NAMES}")
        from ..data.tokenizer import hub_offline

        from_hub = [t for t in tasks if t not in BUILTIN_TASKS] if not self.data_dir else []
        if from_hub and hub_offline():  # else it writes nothing for them and lm-eval fails later, far from here
            raise ConfigError("data_dir", f"{from_hub[0]} would be read from the Hugging Face Hub, which is offline "
                              "here (HF_HUB_OFFLINE=1)", "pass data_dir=<the offline mirror>, e.g. "
                              "../shared/data/eval")


COMMAND = Command("eval-tasks", f"{__doc__.rstrip()}\n\n{textwrap.fill(f'tasks= takes {TASK_NAMES}.', 100)}\n",
                  EvalTasksOptions)


def eval_tasks(options: EvalTasksOptions, _overrides: list[str]) -> int:
    folder = write_tasks(options.task_names, options.out_dir, options.data_dir, options.prepared_root)
    print(f"wrote {len(folder.files)} task files to {folder.include_path}")
    if folder.needs_official_index:
        print("note: some tasks have no mirror here and will be read from the Hugging Face Hub")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, eval_tasks)


if __name__ == "__main__":
    exit_with(main())
