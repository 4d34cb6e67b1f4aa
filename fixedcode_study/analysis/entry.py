"""The library entry of `fixedcode analyze`: `analyze(AnalyzeOptions(...), command)` reads the jobs and
writes the report.

`AnalyzeOptions` is what the analysis is asked to do, each value checked in `__post_init__`; the
command line (cli/analyze.py: `fixedcode analyze`, `python -m analysis` from a checkout) is built
from its fields, their docstrings are its help. `analyze` reads the run directories (and W&B), writes
report.md with its tables and figures (report.py) and, when asked, the study's W&B workspace
(dashboard.py). An AnalysisError is one line on stderr and exit 2. Nothing heavy is imported before
`analyze` runs, so `--help` and a bad setting answer at once.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .errors import AnalysisError


@dataclass(frozen=True, kw_only=True)
class AnalyzeOptions:
    """What the analysis is asked to do (the `fixedcode analyze` settings)."""

    run_dirs: tuple[str, ...] = field(default=(), metadata={"positional": True})  # the bare words (cli/args.py)
    """multirun/run directories; every directory below holding a job's record is a job"""
    out: Path
    """where the report is written"""
    wandb: str | None = None
    """also read runs from the W&B public API (online): ENTITY/PROJECT"""
    group: str | None = None
    """only W&B runs of this group (with wandb=); the dashboard's group (with wandb_report=; default: the
    runs' study name)"""
    probe_runs: tuple[str, ...] = ()
    """also read the jobs under these directories, for the representation probes only: arms trained to be
    probed beside the study's (a scale-matched code, a frozen table) that must not enter its comparisons or
    their Holm family; the directory holding their probes_cross.json may be a parent of the study"""
    reference: bool = False
    """add the full table of published reference numbers (analysis/reference_results.csv); the paper's
    numbers and chance levels are shown in the downstream table regardless"""
    ema_alpha: float | None = None
    """EMA smoothing factor for training-loss curves, per logged point, in (0, 1] (default: the report's)"""
    baseline: str | None = None
    """variant or input every other variant is compared against (default: the report's, learned)"""
    pairs: tuple[str, ...] = ()
    """extra comparisons A:B[,C:D] (A minus B; variant labels or input names); gf2 - binary16 is always
    compared when both ran"""
    primary: tuple[str, ...] = ()
    """the primary comparisons A:B[,C:D], replacing the study file's `primary:` (for a study without one,
    e.g. `run -m name=dynamics ...`); only these rows get verdicts and findings"""
    study: Path | None = None
    """the study file whose `primary:` declares the comparisons (default: sweeps/<study>.yaml of each study
    the jobs ran in; see sweeps/README.md)"""
    min_bucket_tokens: float | None = None
    """loss-breakdown buckets with fewer validation tokens are shown, not tested (default: the report's)"""
    inline_rows: int | None = None
    """results tables (main results, comparisons, code properties, parameters, arms) longer than this are
    linked from report.md instead of shown in it (default: the report's, 30)"""
    note: tuple[str, ...] = ()
    """a line on how and where the jobs ran (machine, precision, launcher), shown under 'What was compared';
    repeatable"""
    margin: tuple[str, ...] = ()
    """METRIC=VALUE: an equivalence margin for TOST, in the metric's units (relative for perplexities: 0.02
    or 2%); METRIC is e.g. val_bpb, hellaswag/acc_norm or acc_norm. Defaults: val_bpb 0.01, val_loss 0.02,
    perplexities 2%, accuracies 0.01"""
    wandb_report: str | None = None
    """ENTITY/PROJECT: build the study's W&B workspace (curves vs training tokens by input with seed bands,
    final metrics with error bars, the runs table), write it to the report folder's wandb_dashboard.json
    and save it to W&B"""
    dry_run: bool = False
    """with wandb_report=: only write the JSON spec, nothing goes to the network (wandb_log_report=true then
    writes an offline run)"""
    wandb_log_report: bool = False
    """with wandb_report=: log the report's tables and figures to one study-level run (job type analysis,
    the study's group) and show them in the workspace"""

    def __post_init__(self) -> None:
        if not self.run_dirs and not self.wandb:
            raise ConfigError("run_dirs", "none given", "give at least one RUN_DIR or wandb=ENTITY/PROJECT")
        if self.probe_runs and not self.run_dirs:
            raise ConfigError("probe_runs", "needs the study's own RUN_DIRs",
                              "give them too (the probe-only arms are read beside them)")
        if self.group is not None and not (self.wandb or self.wandb_report):
            raise ConfigError("group", "needs wandb= or wandb_report=", "give one, or drop group=")
        if self.group is not None and not self.group.strip():
            raise ConfigError("group", "is empty", "pass a group name")
        if self.wandb_report is not None:
            entity, _, project = self.wandb_report.partition("/")
            if not entity or not project or "/" in project:
                raise ConfigError("wandb_report", f"expects ENTITY/PROJECT, got {self.wandb_report!r}",
                                  "pass wandb_report=ENTITY/PROJECT")
        for name in ("dry_run", "wandb_log_report"):
            if getattr(self, name) and not self.wandb_report:
                raise ConfigError(name, "needs wandb_report=ENTITY/PROJECT", f"give it, or drop {name}=")
        if self.min_bucket_tokens is not None and not self.min_bucket_tokens >= 0:
            raise ConfigError("min_bucket_tokens", f"{self.min_bucket_tokens} is negative", "pass a number of tokens >= 0")
        if self.inline_rows is not None and self.inline_rows < 0:
            raise ConfigError("inline_rows", f"{self.inline_rows} is negative", "pass a number of rows >= 0")
        if self.ema_alpha is not None and not 0.0 < self.ema_alpha <= 1.0:
            raise ConfigError("ema_alpha", f"{self.ema_alpha} is outside (0, 1]", "pass 0 < ema_alpha <= 1")




def load(args: AnalyzeOptions):
    """(the study, the probe section's study or None); every job directory is read once."""
    # Imports here so that `--help` and argument errors answer instantly.
    from .read.runs import Collected, build_study, collect_run_dirs

    from_dirs = collect_run_dirs(args.run_dirs) if args.run_dirs else Collected()
    collected = from_dirs
    if args.wandb:
        from .read.wandb import collect_wandb

        collected += collect_wandb(args.wandb, args.group)
    return build_study(collected), load_probe_study(args, from_dirs)


def load_probe_study(args: AnalyzeOptions, study_dirs):
    """The study's run dirs plus probe_runs=as one study (a job under both counts once), so the
    probe-only arms get their labels and same-seed learned partners the way the study's arms do.
    The study's jobs come from `study_dirs`, already read: only what the probe roots add is read."""
    if not args.probe_runs:
        return None
    from .read.runs import build_study, collect_run_dirs

    return build_study(study_dirs + collect_run_dirs(args.probe_runs, already=study_dirs))


def analyze(args: AnalyzeOptions, command: str) -> int:
    """Write the report `args` asks for; `command` is the command line the report says it was
    generated by. 0, or 2 after one line for an AnalysisError."""
    started = time.perf_counter()
    try:
        # Options first: a typo in pairs=or margin=fails before any run is read.
        from .stats.comparisons import parse_pairs
        from .stats.equivalence import Margins
        from .report import ReportOptions, write_report

        given = {name: getattr(args, name) for name in ("ema_alpha", "baseline", "min_bucket_tokens", "inline_rows")
                 if getattr(args, name) is not None}  # the rest: the report's own defaults
        options = ReportOptions(reference=args.reference, command=command, pairs=parse_pairs(args.pairs, "pairs="),
                                margins=Margins.from_args(args.margin), primary=parse_pairs(args.primary, "primary="),
                                study=args.study, notes=tuple(n.strip() for n in args.note if n.strip()), **given)
        study, probe_study = load(args)
        output = write_report(study, args.out, options, probe_study)
        included, excluded = len(study.included_jobs), len(study.excluded_jobs)
        print(f"wrote {output.report} ({included} jobs in tables, {excluded} excluded, "
              f"{len(output.figures)} figures) in {time.perf_counter() - started:.1f} s")
        if args.wandb_report:
            wandb_dashboard(args, study, output, command, options.ema_alpha)
    except AnalysisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def wandb_dashboard(args: AnalyzeOptions, study, output, command: str, ema_alpha: float) -> None:
    """wandb_report=: the spec always lands in the report folder; W&B sees it (and an online analysis
    run) only without dry_run=true."""
    from . import dashboard

    entity, project = args.wandb_report.split("/")  # checked by the options
    group = dashboard.study_group(study, args.group)
    tables, figures = dashboard.report_files(output) if args.wandb_log_report else ({}, {})
    workspace = dashboard.build_workspace(entity, project, group, study, ema_alpha=ema_alpha,
                                          figures=figures, tables=tables)
    spec = dashboard.write_spec(workspace, group, args.out / dashboard.SPEC_FILE)
    print(f"wrote {spec} (W&B workspace for group {group!r} in {entity}/{project})")
    if args.wandb_log_report:
        run = dashboard.log_report(output, entity, project, group, offline=args.dry_run, command=command)
        print(f"logged {len(tables)} tables and {len(figures)} figures to W&B run {run}"
              + (f" (offline; upload with `wandb sync {run}`)" if args.dry_run else ""))
    if not args.dry_run:
        print(f"saved the workspace: {dashboard.publish(workspace)}")
