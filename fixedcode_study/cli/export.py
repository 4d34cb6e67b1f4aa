"""`fixedcode export checkpoint=DIR out=DIR [overwrite=false] [verify=true]`: a checkpoint -> a Hugging Face folder.

    fixedcode export checkpoint=outputs/multirun/main/input=gf2,seed=1 out=exports/gf2-s1

checkpoint= is a job directory, its checkpoints/final folder, or one of our exports whose source
checkpoint is here and unchanged, which is then exported again from it (hub/source.py: the same
rule as generate, evaluate, probe and lm-eval; an export copied elsewhere is refused). The result
is a Hugging Face folder: a learned-input model with the untied or tied head is a plain
LlamaForCausalLM; a fixed-code input (alone, or followed by its trained map: code_map; or a
low-rank table and its map: learned_lowrank) or a table-free head (output=fixed, bitchain) carries
modeling_fixedcode.py (config.json `auto_map`) and loads with `trust_remote_code=True`, offline,
with no V x d input tensor in its weights (and, for a table-free head, no V x d head tensor). Before
the folder is put in place it is loaded back through transformers and its logits (and, for a fixed
code, its input for every token ID; for a table-free head, its code or chain tables) are checked
against the workbench model (verify=false skips that). The work is hub/export.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    checkpoint: str
    """job or checkpoint folder, or an export of one"""
    out: str
    """the new Hugging Face folder"""
    overwrite: bool = False
    """replace an existing out folder"""
    verify: bool = True
    """load the folder back and compare its logits with the workbench model's"""


COMMAND = Command("export", __doc__, ExportOptions)


def export(options: ExportOptions, _overrides: list[str]) -> int:
    from ..hub.export import export_checkpoint  # the model stack loads only for an export: --help stays instant

    # export_checkpoint applies the one checkpoint= rule (hub/source.py) itself
    exported = export_checkpoint(options.checkpoint, options.out, verify=options.verify, overwrite=options.overwrite)
    inputs = ", ".join(f"{k} {v}" for k, v in exported.input_tensors.items()) or "none (computed from the ID)"
    checked = ("not checked (verify=false)" if exported.max_abs_logit_diff is None
               else f"logits equal the workbench model's (max |diff| {exported.max_abs_logit_diff:.1e})")
    head = ", ".join(f"{k} {v}" for k, v in (exported.head_tensors or {}).items()) or "none (tied to the input table)"
    print(f"[export] {exported.architecture} -> {exported.path}\n  input tensors: {inputs}\n"
          f"  {exported.head} head tensors: {head}\n  {checked}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, export)


if __name__ == "__main__":
    exit_with(main())
