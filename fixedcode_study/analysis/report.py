"""Write a report directory for a loaded Study: report.md, tables/ and figures/.

    results = compute(study, options)          results/: every estimate, once
    parts = [s.build(results, fig_dir) ...]    sections/: each section's tables, figures and text
    report.md = the parts in order, figures numbered as they appear

Which files a report writes comes from the sections themselves (their TABLES and FIGURES), so an
old report's file that no section writes any more is removed before the new one is written. Every
file is written atomically (record/atomic.py): a reader sees the old report's file or the new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..record.atomic import write_text
from .figures.style import FigureFile, style_context
from .results import ReportOptions, Results, compute
from .sections import SECTIONS
from .sections.base import Part
from .tables import summary as tables
from .tables.render import Table, write_csv, write_table

__all__ = ["ReportOptions", "ReportOutput", "OUR_TABLES", "OUR_FIGURES", "write_report", "report_markdown"]

OUR_TABLES = tuple(dict.fromkeys(name for section in SECTIONS for name in section.TABLES))
OUR_FIGURES = tuple(dict.fromkeys(name for section in SECTIONS for name in section.FIGURES))
FIGURE_TOKEN = re.compile(r"\[\[figure:(?P<stem>[^\]]+)\]\]")   # sections/base.py REF


@dataclass
class ReportOutput:
    report: Path
    tables: dict[str, Table] = field(default_factory=dict)
    figures: list[FigureFile] = field(default_factory=list)
    results: Results | None = None


def remove_stale_outputs(out_dir: Path) -> None:
    """Delete outputs of an earlier report in the same directory (only files this tool writes, including
    names earlier versions wrote), so a figure or table that no longer applies cannot be mistaken for a current one."""
    stale = [out_dir / "tables" / f"{n}.{e}" for n in OUR_TABLES for e in ("md", "tex", "csv")]
    stale += [out_dir / "figures" / f"{n}.{e}" for n in OUR_FIGURES for e in ("png", "pdf")]
    for path in stale:
        path.unlink(missing_ok=True)


def build_parts(results: Results, fig_dir: Path) -> list[Part]:
    with style_context():
        return [section.build(results, fig_dir) for section in SECTIONS]


def report_markdown(parts: list[Part]) -> str:
    """The parts in order, each figure reference replaced by its number (figures numbered as they appear)."""
    numbers = {f.stem: i for i, f in enumerate((f for p in parts for f in p.figures), start=1)}
    text = "\n".join(line for part in parts for line in part.lines)
    return FIGURE_TOKEN.sub(lambda m: f"Figure {numbers[m['stem']]}" if m["stem"] in numbers else "a figure", text)


def jobs_frame(results: Results) -> pd.DataFrame:
    """tables/jobs.csv: one row per job, every number the tables summarise, keyed by run directory;
    with probe_runs=the probe-only jobs too (probe_only = true)."""
    jobs = tables.jobs_table(results.study)
    if results.probe_study is not results.study:
        extra = tables.jobs_table(results.probe_study)
        extra = extra[~extra["run"].isin(jobs["run"])]
        jobs = pd.concat([jobs.assign(probe_only=False), extra.assign(probe_only=True)], ignore_index=True)
    return jobs


def write_report(study, out_dir: Path, options: ReportOptions | None = None, probe_study=None) -> ReportOutput:
    out_dir = Path(out_dir)
    results = compute(study, options, probe_study)   # before deleting anything: a bad pairs=leaves the old report intact
    remove_stale_outputs(out_dir)
    fig_dir, table_dir = out_dir / "figures", out_dir / "tables"
    parts = build_parts(results, fig_dir)
    made = {name: table for part in parts for name, table in part.tables.items()}
    for table in made.values():
        write_table(table, table_dir)
    write_csv(jobs_frame(results), table_dir / "jobs.csv")
    report = out_dir / "report.md"
    write_text(report, report_markdown(parts))
    return ReportOutput(report, made, [f for part in parts for f in part.figures], results)
