"""`fixedcode analyze RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--wandb ENTITY/PROJECT [--group G]]
[--probe-runs RUN_DIR ...] [--baseline NAME] [--pairs A:B[,C:D]] [--primary A:B[,C:D]] [--study FILE.yaml]
[--min-bucket-tokens N] [--margin METRIC=VALUE ...] [--note TEXT ...] [--reference] [--ema-alpha A]
[--wandb-report ENTITY/PROJECT [--dry-run] [--wandb-log-report]]` (the study's W&B dashboard: dashboard.py).

Tables, figures and report.md from fixed-code study runs (see docs/results-schema.md).
`python -m analysis ...` (from a checkout) and `python -m fixedcode_study.analysis ...` are the same
command. The arguments stay argparse's (RUN_DIRs are paths such as `.../input=gf2,seed=1`, which
the workbench's key=value convention would read as settings), with the workbench's error
convention: a bad argument is one line on stderr and exit 2, and `main` returns the exit code.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from .errors import AnalysisError


class UsageStop(Exception):
    """parse_args stops: --help (code 0) or a bad argument (code 2, `line` is its one-line error)."""

    def __init__(self, code: int, line: str | None = None):
        super().__init__(line or "")
        self.code, self.line = code, line


class _Parser(argparse.ArgumentParser):
    """argparse that prints a bad argument as one line (not usage plus error) and exits nothing itself."""

    def error(self, message: str):
        raise UsageStop(2, f"error: {message}; see fixedcode analyze --help")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            print(message, file=sys.stderr, end="")
        raise UsageStop(status)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _Parser(
        prog="fixedcode analyze",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Runs that differ in optim.lr (or optim.warmup_*) within one input are a tuning study, detected "
               "automatically: each arm's best learning rate is chosen on val_loss_select and the arms are "
               "compared on the held-out val_loss_report (see report.md, Methods).")
    parser.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                        help="multirun/run directories; every directory below holding results.json is a job")
    parser.add_argument("--out", required=True, type=Path, metavar="REPORT_DIR", help="where the report is written")
    parser.add_argument("--wandb", metavar="ENTITY/PROJECT", help="also read runs from the W&B public API (online)")
    parser.add_argument("--group", metavar="G", help="only W&B runs of this group (with --wandb); the dashboard's "
                                                     "group (with --wandb-report; default: the runs' study name)")
    parser.add_argument("--probe-runs", action="extend", nargs="+", default=[], metavar="RUN_DIR",
                        help="also read the jobs under these directories, for the representation probes only: arms "
                             "trained to be probed beside the study's (a scale-matched code, a frozen table) that "
                             "must not enter its comparisons or their Holm family; the directory holding their "
                             "probes_cross.json may be a parent of the study")
    parser.add_argument("--reference", action="store_true",
                        help="add the full table of published reference numbers (analysis/reference_results.csv); "
                             "the paper's numbers and chance levels are shown in the downstream table regardless")
    parser.add_argument("--ema-alpha", type=float, default=0.1,
                        help="EMA smoothing factor for training-loss curves, per logged point (default 0.1)")
    parser.add_argument("--baseline", default="learned", metavar="NAME",
                        help="variant or input every other variant is compared against (default: learned)")
    parser.add_argument("--pairs", action="append", default=[], metavar="A:B[,C:D]",
                        help="extra comparisons A minus B (variant labels or input names); repeatable. "
                             "gf2 - binary16 is always compared when both ran")
    parser.add_argument("--primary", action="append", default=[], metavar="A:B[,C:D]",
                        help="the primary comparisons (A minus B), replacing the study file's `primary:` (for a study "
                             "without one, e.g. `run -m name=dynamics ...`); only these rows get verdicts and findings")
    parser.add_argument("--study", type=Path, metavar="FILE.yaml",
                        help="the study file whose `primary:` declares the comparisons (default: sweeps/<study>.yaml "
                             "of each study the jobs ran in; see sweeps/README.md)")
    parser.add_argument("--min-bucket-tokens", type=float, default=None, metavar="N",
                        help="loss-breakdown buckets with fewer validation tokens are shown, not tested (default 100)")
    parser.add_argument("--margin", action="append", default=[], metavar="METRIC=VALUE",
                        help="equivalence margin for TOST, in the metric's units (relative for perplexities: "
                             "0.02 or 2%%); METRIC is e.g. val_bpb, hellaswag/acc_norm or acc_norm; repeatable. "
                             "Defaults: val_bpb 0.01, val_loss 0.02, perplexities 2%%, accuracies 0.01")
    parser.add_argument("--note", action="append", default=[], metavar="TEXT",
                        help="a line on how and where the jobs ran (machine, precision, launcher), shown under "
                             "'What was compared'; repeatable")
    dashboard = parser.add_argument_group("W&B dashboard (analysis/dashboard.py)")
    dashboard.add_argument("--wandb-report", metavar="ENTITY/PROJECT",
                           help="build the study's W&B workspace (curves vs training tokens by input with seed bands, "
                                "final metrics with error bars, the runs table), write it to "
                                "REPORT_DIR/wandb_dashboard.json and save it to W&B")
    dashboard.add_argument("--dry-run", action="store_true",
                           help="with --wandb-report: only write the JSON spec, nothing goes to the network "
                                "(--wandb-log-report then writes an offline run)")
    dashboard.add_argument("--wandb-log-report", action="store_true",
                           help="with --wandb-report: log the report's tables and figures to one study-level run "
                                "(job type analysis, the study's group) and show them in the workspace")
    args = parser.parse_args(argv)
    if not args.run_dirs and not args.wandb:
        parser.error("give at least one RUN_DIR or --wandb ENTITY/PROJECT")
    if args.probe_runs and not args.run_dirs:
        parser.error("--probe-runs needs the study's own RUN_DIRs (the probe-only arms are read beside them)")
    if args.group is not None and not (args.wandb or args.wandb_report):
        parser.error("--group needs --wandb or --wandb-report")
    if args.group is not None and not args.group.strip():
        parser.error("--group needs a non-empty group name")
    if args.wandb_report is not None:
        entity, _, project = args.wandb_report.partition("/")
        if not entity or not project or "/" in project:
            parser.error(f"--wandb-report expects ENTITY/PROJECT, got {args.wandb_report!r}")
    for flag in ("dry_run", "wandb_log_report"):
        if getattr(args, flag) and not args.wandb_report:
            parser.error(f"--{flag.replace('_', '-')} needs --wandb-report ENTITY/PROJECT")
    if args.min_bucket_tokens is not None and not args.min_bucket_tokens >= 0:
        parser.error("--min-bucket-tokens must be a number of tokens >= 0")
    if not 0.0 < args.ema_alpha <= 1.0:
        parser.error("--ema-alpha must be in (0, 1]")
    return args


def load(args: argparse.Namespace):
    """(the study, the probe section's study or None); every job directory is read once."""
    # Imports here so that `--help` and argument errors answer instantly.
    from .read.runs import Collected, build_study, collect_run_dirs

    from_dirs = collect_run_dirs(args.run_dirs) if args.run_dirs else Collected()
    collected = from_dirs
    if args.wandb:
        from .read.wandb import collect_wandb

        collected += collect_wandb(args.wandb, args.group)
    return build_study(collected), load_probe_study(args, from_dirs)


def load_probe_study(args: argparse.Namespace, study_dirs):
    """The study's run dirs plus --probe-runs as one study (a job under both counts once), so the
    probe-only arms get their labels and same-seed learned partners the way the study's arms do.
    The study's jobs come from `study_dirs`, already read: only what the probe roots add is read."""
    if not args.probe_runs:
        return None
    from .read.runs import build_study, collect_run_dirs

    return build_study(study_dirs + collect_run_dirs(args.probe_runs, already=study_dirs))


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except UsageStop as stop:
        if stop.line:
            print(stop.line, file=sys.stderr)
        return stop.code
    started = time.perf_counter()
    try:
        # Options first: a typo in --pairs or --margin fails before any run is read.
        from .stats.comparisons import parse_pairs
        from .stats.equivalence import Margins
        from .report import ReportOptions, write_report

        command = "python -m analysis " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        options = ReportOptions(args.reference, args.ema_alpha, command, args.baseline, parse_pairs(args.pairs),
                                Margins.from_args(args.margin), parse_pairs(args.primary, "--primary"), args.study)
        if args.min_bucket_tokens is not None:
            options.min_bucket_tokens = args.min_bucket_tokens
        options.notes = tuple(n.strip() for n in args.note if n.strip())
        study, probe_study = load(args)
        output = write_report(study, args.out, options, probe_study)
        included, excluded = len(study.included_jobs), len(study.excluded_jobs)
        print(f"wrote {output.report} ({included} jobs in tables, {excluded} excluded, "
              f"{len(output.figures)} figures) in {time.perf_counter() - started:.1f} s")
        if args.wandb_report:
            wandb_dashboard(args, study, output, command)
    except AnalysisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def wandb_dashboard(args: argparse.Namespace, study, output, command: str) -> None:
    """--wandb-report: the spec always lands in REPORT_DIR; W&B sees it (and an online analysis run)
    only without --dry-run."""
    from . import dashboard

    entity, project = args.wandb_report.split("/")  # checked in parse_args
    group = dashboard.study_group(study, args.group)
    tables, figures = dashboard.report_files(output) if args.wandb_log_report else ({}, {})
    workspace = dashboard.build_workspace(entity, project, group, study, ema_alpha=args.ema_alpha,
                                          figures=figures, tables=tables)
    spec = dashboard.write_spec(workspace, group, args.out / dashboard.SPEC_FILE)
    print(f"wrote {spec} (W&B workspace for group {group!r} in {entity}/{project})")
    if args.wandb_log_report:
        run = dashboard.log_report(output, entity, project, group, offline=args.dry_run, command=command)
        print(f"logged {len(tables)} tables and {len(figures)} figures to W&B run {run}"
              + (f" (offline; upload with `wandb sync {run}`)" if args.dry_run else ""))
    if not args.dry_run:
        print(f"saved the workspace: {dashboard.publish(workspace)}")


if __name__ == "__main__":
    sys.exit(main())
