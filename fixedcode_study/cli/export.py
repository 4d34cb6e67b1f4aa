"""`python -m fixedcode_study.export checkpoint=DIR out=DIR [overwrite=false] [verify=true]`.

    python -m fixedcode_study.export checkpoint=outputs/multirun/main/input=gf2,seed=1 out=exports/gf2-s1

checkpoint= is a final checkpoint folder or a job directory. The result is a Hugging Face folder:
a learned-input model is a plain LlamaForCausalLM; a fixed-code model carries modeling_fixedcode.py
(config.json `auto_map`) and loads with `trust_remote_code=True`, offline, with no V x d input
tensor in its weights. Before the folder is put in place it is loaded back through transformers
and its logits (and, for a fixed code, its input for every token ID) are checked against the
workbench model (verify=false skips that). The work is hub/export.py's.
"""

from __future__ import annotations

from . import args as cliargs
from ..hub.export import export_checkpoint

USAGE = "usage: checkpoint=<checkpoint or job folder> out=<new folder> [overwrite=false] [verify=true]"


def export(args: list[str]) -> None:
    opts = cliargs.parse(args, {"checkpoint": cliargs.REQUIRED, "out": cliargs.REQUIRED,
                                "overwrite": False, "verify": True}, USAGE)
    exported = export_checkpoint(opts["checkpoint"], opts["out"], verify=opts["verify"], overwrite=opts["overwrite"])
    inputs = ", ".join(f"{k} {v}" for k, v in exported.input_tensors.items()) or "none (computed from the ID)"
    checked = ("not checked (verify=false)" if exported.max_abs_logit_diff is None
               else f"logits equal the workbench model's (max |diff| {exported.max_abs_logit_diff:.1e})")
    print(f"[export] {exported.architecture} -> {exported.path}\n  input tensors: {inputs}\n  {checked}")


def main(argv: list[str] | None = None) -> None:
    cliargs.run_command(argv, __doc__, export)


if __name__ == "__main__":
    main()
