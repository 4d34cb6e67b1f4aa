"""CLI: python -m analysis RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--wandb ENTITY/PROJECT [--group G]]."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from analysis.errors import AnalysisError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m analysis",
        description="Tables, figures and report.md from fixed-code study runs (see docs/results-schema.md).")
    parser.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                        help="multirun/run directories; every directory below holding results.json is a job")
    parser.add_argument("--out", required=True, type=Path, metavar="REPORT_DIR", help="where the report is written")
    parser.add_argument("--wandb", metavar="ENTITY/PROJECT", help="also read runs from the W&B public API (online)")
    parser.add_argument("--group", metavar="G", help="only W&B runs of this group (with --wandb)")
    parser.add_argument("--reference", action="store_true",
                        help="add published reference numbers from analysis/reference_results.csv")
    parser.add_argument("--ema-alpha", type=float, default=0.1,
                        help="EMA smoothing factor for training-loss curves, per logged point (default 0.1)")
    args = parser.parse_args(argv)
    if not args.run_dirs and not args.wandb:
        parser.error("give at least one RUN_DIR or --wandb ENTITY/PROJECT")
    if args.group and not args.wandb:
        parser.error("--group needs --wandb")
    if not 0.0 < args.ema_alpha <= 1.0:
        parser.error("--ema-alpha must be in (0, 1]")
    return args


def load(args: argparse.Namespace):
    # Imports here so that `--help` and argument errors answer instantly.
    from analysis.load import Collected, build_study, collect_run_dirs

    collected = Collected()
    if args.run_dirs:
        collected += collect_run_dirs(args.run_dirs)
    if args.wandb:
        from analysis.wandb_source import collect_wandb

        collected += collect_wandb(args.wandb, args.group)
    return build_study(collected)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        study = load(args)
        from analysis.report import ReportOptions, write_report

        command = "python -m analysis " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        output = write_report(study, args.out, ReportOptions(args.reference, args.ema_alpha, command))
    except AnalysisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    included, excluded = len(study.included_jobs), len(study.excluded_jobs)
    print(f"wrote {output.report} ({included} jobs in tables, {excluded} excluded, "
          f"{len(output.figures)} figures) in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
