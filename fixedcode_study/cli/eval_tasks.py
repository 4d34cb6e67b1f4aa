"""Write task YAMLs for `lm_eval --include_path` (the folder holds absolute paths; regenerate it
when the mirror or the data cache moves).

    python -m fixedcode_study.eval_tasks OUT_DIR --tasks hellaswag,wikitext,mmlu --data-dir ../shared/data/eval
    python -m fixedcode_study.eval_tasks OUT_DIR --tasks fixedcode_heldout_ppl --prepared-root ~/.cache/fixedcode_study/shakespeare-<key>
    python -m fixedcode_study.lm_eval_model --model fixedcode --model_args checkpoint=PATH \\
        --include_path OUT_DIR --tasks hellaswag,wikitext,mmlu
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ConfigError
from ..evaluation.tasks import write_tasks


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m fixedcode_study.eval_tasks", description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--tasks", required=True, help="comma-separated task names")
    p.add_argument("--data-dir", default=None, help="offline mirror folder (one sub-folder per task)")
    p.add_argument("--prepared-root", default=None, help="data cache folder, for the built-in tasks")
    args = p.parse_args(argv)
    try:
        folder = write_tasks([t for t in args.tasks.split(",") if t], args.out_dir, args.data_dir, args.prepared_root)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {len(folder.files)} task files to {folder.include_path}")
    if folder.needs_official_index:
        print("note: some tasks have no mirror here and will be read from the Hugging Face Hub")


if __name__ == "__main__":
    main()
