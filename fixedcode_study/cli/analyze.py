"""`fixedcode analyze RUN_DIR [RUN_DIR ...] out=REPORT_DIR [settings]`: run directories -> tables, figures, report.md.

    fixedcode analyze outputs/multirun/main out=reports/main
    fixedcode analyze outputs/multirun/main probe_runs=outputs/multirun out=reports/main
    fixedcode analyze outputs/multirun/controls out=reports/controls pairs=binary16_permuted:binary16
    fixedcode analyze wandb=ENTITY/PROJECT group=main out=reports/main          # the runs from W&B
    fixedcode analyze outputs/multirun/main out=reports/main wandb_report=ENTITY/PROJECT dry_run=true

Tables, figures and report.md from fixed-code study runs (see docs/results-schema.md); every folder
below a RUN_DIR that holds a job's record is a job. `python -m analysis ...` from a checkout is the
same command. A RUN_DIR named like a setting (`input=gf2,seed=1`, run from inside a sweep folder)
is written `./input=gf2,seed=1`; any path with a `/` in front of its `=` is read as a RUN_DIR.
Runs that differ in optim.lr (or optim.warmup_*) within one input are a tuning study, detected
automatically: each arm's best learning rate is chosen on val_loss_select and the arms are compared
on the held-out val_loss_report (see report.md, Methods). The work is fixedcode_study/analysis/'s
(entry.py; the W&B dashboard: dashboard.py).
"""

from __future__ import annotations

import shlex
import sys

from ..analysis.entry import AnalyzeOptions, analyze
from .args import Command, exit_with, run_command


COMMAND = Command("analyze", __doc__, AnalyzeOptions)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = "python -m analysis " + " ".join(shlex.quote(a) for a in args)  # as the report says it was made
    return run_command(COMMAND, args, lambda options, _overrides: analyze(options, command))


if __name__ == "__main__":
    exit_with(main())
