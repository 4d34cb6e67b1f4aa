"""`python -m fixedcode_study.evaluate checkpoint=PATH | hf=MODEL  eval=builtin|paper [eval.* overrides]`.

    python -m fixedcode_study.evaluate checkpoint=PATH eval=builtin
    python -m fixedcode_study.evaluate checkpoint=PATH eval=paper eval.data_dir=../shared/data/eval eval.limit=100
    python -m fixedcode_study.evaluate hf=HuggingFaceTB/SmolLM2-135M eval=builtin study=outputs/multirun/main
    python -m fixedcode_study.evaluate hf=exports/gf2-s1 eval=builtin

`checkpoint=` is a checkpoint directory written by `run` (model.safetensors, config.json,
tokenizer.json); the record goes beside it. `hf=` is any Hugging Face causal LM, a local folder or a
Hub name (offline: from the local cache), evaluated with lm-eval's own `hf` model; its record goes
to <study>/external/<name>@<revision>/external.json (study= defaults to ${out_root}/multirun/main),
where `python -m analysis <study>` shows it as a reference row. With hf=: `hf_revision=` pins a Hub
revision, `trust_remote_code=true` allows a folder's own modeling code (our exports are trusted
without it). Every other argument is a Hydra override of the `eval` config group
(conf/eval/{none,builtin,paper}.yaml). The work is evaluation/harness.py's and hub/external.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import args as cliargs
from ..errors import ConfigError
from ..evaluation.harness import compose_eval_config, evaluate_checkpoint
from ..record.jobdir import JobDir


def format_summary(record: Mapping[str, Any]) -> str:
    head = (f"[eval] {record['suite']} on {record['checkpoint']} (lm-eval {record['lm_eval_version']}, "
            f"{record['seconds']}s)")
    lines = [head]
    for task, metrics in record["tasks"].items():
        shown = [f"{m}={v:.4g}" + (f"±{metrics[m + '_stderr']:.2g}" if metrics.get(m + "_stderr") else "")
                 for m, v in metrics.items() if not m.endswith("_stderr") and v is not None]
        lines.append(f"  {task}: " + " ".join(shown))
    return "\n".join(lines)


OWN_KEYS = ("checkpoint", "hf", "hf_revision", "trust_remote_code", "study")


def evaluate(args: list[str]) -> None:
    own = cliargs.take(args, OWN_KEYS)
    if (own["checkpoint"] is None) == (own["hf"] is None):
        raise ConfigError("checkpoint", "missing" if own["checkpoint"] is None else "given together with hf=",
                          f"pass checkpoint=<checkpoint directory>, e.g. {JobDir('outputs/runs/main/defaults').final_checkpoint}, "
                          "or hf=<Hugging Face folder or Hub name>")
    hf_only = [k for k in ("hf_revision", "trust_remote_code", "study") if own[k] is not None]
    if own["checkpoint"] is not None and hf_only:
        raise ConfigError(hf_only[0], "applies to hf= models only", f"drop {hf_only[0]}= or use hf=")
    if own["trust_remote_code"] not in (None, "true", "false"):
        raise ConfigError("trust_remote_code", f"{own['trust_remote_code']!r} is not true or false",
                          "pass trust_remote_code=true or false")
    eval_cfg = compose_eval_config([a for a in args if a.split("=", 1)[0] not in OWN_KEYS])
    if own["hf"] is not None:
        from ..hub.external import default_study, evaluate_external

        record = evaluate_external(own["hf"], eval_cfg, own["study"] or default_study(), own["hf_revision"],
                                   trust_remote_code=own["trust_remote_code"] == "true")
        record["checkpoint"] = f"{record['external']['name']} @ {record['external']['revision']}"
    else:
        record = evaluate_checkpoint(own["checkpoint"], eval_cfg)
    print(format_summary(record))
    print(f"[eval] wrote {record['output']}")


def main(argv: list[str] | None = None) -> None:
    cliargs.run_command(argv, __doc__, evaluate)


if __name__ == "__main__":
    main()
