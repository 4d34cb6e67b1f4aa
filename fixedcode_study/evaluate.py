"""`python -m fixedcode_study.evaluate checkpoint=PATH eval=builtin|paper [eval.* overrides]`.

    python -m fixedcode_study.evaluate checkpoint=PATH eval=builtin
    python -m fixedcode_study.evaluate checkpoint=PATH eval=paper eval.data_dir=../shared/data/eval eval.limit=100

`checkpoint=` is a checkpoint directory written by `run` (model.safetensors, config.json,
tokenizer.json); every other argument is a Hydra override of the `eval` config group
(conf/eval/{none,builtin,paper}.yaml). The work is evaluation/harness.py's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError
from .evaluation.harness import compose_eval_config, evaluate_checkpoint
from .record.jobdir import JobDir


def format_summary(record: Mapping[str, Any]) -> str:
    head = (f"[eval] {record['suite']} on {record['checkpoint']} (lm-eval {record['lm_eval_version']}, "
            f"{record['seconds']}s)")
    lines = [head]
    for task, metrics in record["tasks"].items():
        shown = [f"{m}={v:.4g}" + (f"±{metrics[m + '_stderr']:.2g}" if metrics.get(m + "_stderr") else "")
                 for m, v in metrics.items() if not m.endswith("_stderr") and v is not None]
        lines.append(f"  {task}: " + " ".join(shown))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print(__doc__)
        return
    try:
        checkpoints = [a.split("=", 1)[1] for a in args if a.startswith("checkpoint=")]
        if len(checkpoints) != 1:
            raise ConfigError("checkpoint", "missing" if not checkpoints else "given twice",
                              f"pass checkpoint=<checkpoint directory>, e.g. {JobDir('outputs/runs/main/defaults').final_checkpoint}")
        eval_cfg = compose_eval_config([a for a in args if not a.startswith("checkpoint=")])
        record = evaluate_checkpoint(checkpoints[0], eval_cfg)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(format_summary(record))
    print(f"[eval] wrote {record['output']}")


if __name__ == "__main__":
    main()
