"""`fixedcode evaluate checkpoint=PATH | hf=MODEL  eval=builtin|paper [eval.* overrides]`: lm-eval on a model.

    fixedcode evaluate checkpoint=PATH eval=builtin
    fixedcode evaluate checkpoint=PATH eval=paper eval.data_dir=../shared/data/eval eval.limit=100
    fixedcode evaluate hf=HuggingFaceTB/SmolLM2-135M eval=builtin study=outputs/multirun/main
    fixedcode evaluate hf=exports/gf2-s1 eval=builtin

`checkpoint=` is a job directory or its checkpoints/final folder (or one of our exports whose
source checkpoint is here and unchanged: that checkpoint is read; hub/source.py, the same rule as
every command), scored by the workbench adapter; the record goes beside the checkpoint. `hf=` is any Hugging Face causal LM, a local folder or a
Hub name (offline: from the local cache), evaluated with lm-eval's own `hf` model; its record goes
to <study>/external/<name>@<revision>/external.json (study= defaults to ${out_root}/multirun/main),
where `fixedcode analyze <study>` shows it as a reference row. With hf=: `hf_revision=` pins a Hub
revision, `trust_remote_code=true` allows a folder's own modeling code (our exports are trusted
without it). Every other argument is a Hydra override of the `eval` config group
(conf/eval/{none,builtin,paper}.yaml). The work is evaluation/harness.py's and hub/external.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import compose, plain
from ..errors import ConfigError
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions:
    checkpoint: str | None = None
    """a job directory or its final checkpoint folder (or an export of one)"""
    hf: str | None = None
    """a Hugging Face model folder or Hub name instead"""
    hf_revision: str | None = None
    """hf= only: the Hub revision"""
    trust_remote_code: bool | None = None
    """hf= only: allow the folder's own modeling code"""
    study: str | None = None
    """hf= only: the study whose external/ gets the record"""

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.hf is None):
            raise ConfigError("checkpoint", "missing" if self.checkpoint is None else "given together with hf=",
                              "pass checkpoint=<a job directory or its final checkpoint folder>, e.g. "
                              "outputs/runs/main/defaults, or hf=<Hugging Face folder or Hub name>")
        hf_only = [k for k in ("hf_revision", "trust_remote_code", "study") if getattr(self, k) is not None]
        if self.checkpoint is not None and hf_only:
            raise ConfigError(hf_only[0], "applies to hf= models only", f"drop {hf_only[0]}= or use hf=")


COMMAND = Command("evaluate", __doc__, EvaluateOptions, overrides=True)


def compose_eval_config(overrides: list[str]) -> Any:
    """The validated evaluation settings (spec.evaluation.EvalSpec) of the project config with these overrides."""
    from ..spec.evaluation import EvalSpec

    return EvalSpec.of(plain(compose(overrides).eval))


def format_summary(record: Mapping[str, Any]) -> str:
    lines = [f"[eval] {record['suite']} on {record['checkpoint']} (lm-eval {record['lm_eval_version']}, "
             f"{record['seconds']}s)"]
    for task, metrics in record["tasks"].items():
        shown = [f"{m}={v:.4g}" + (f"±{metrics[m + '_stderr']:.2g}" if metrics.get(m + "_stderr") else "")
                 for m, v in metrics.items() if not m.endswith("_stderr") and v is not None]
        lines.append(f"  {task}: " + " ".join(shown))
    return "\n".join(lines)


def body(options: EvaluateOptions, overrides: list[str]) -> int:
    from ..spec.evaluation import EvalSpec

    cfg = compose(overrides)
    settings = EvalSpec.of(plain(cfg.eval))
    if options.hf is not None:
        from ..hub.external import evaluate_external

        study = options.study or str(Path(cfg.out_root) / "multirun" / "main")
        record = evaluate_external(options.hf, settings, study, options.hf_revision,
                                   trust_remote_code=bool(options.trust_remote_code), data_cfg=plain(cfg.data))
        record["checkpoint"] = f"{record['external']['name']} @ {record['external']['revision']}"
    else:
        from ..evaluation.harness import evaluate_checkpoint
        from ..hub.source import checkpoint_folder

        folder = checkpoint_folder(options.checkpoint, f"pass hf={options.checkpoint} to evaluate the folder itself")
        record = evaluate_checkpoint(folder, settings)
    print(format_summary(record))
    print(f"[eval] wrote {record['output']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, body)


if __name__ == "__main__":
    exit_with(main())
