"""What was compared: where the jobs came from, each arm's seeds, and every caveat a reader must see
before reading a number (the readers' notes, the estimates' notes, and the tables' own)."""

from __future__ import annotations

from pathlib import Path

from ...record.jobdir import RESULTS_FILE
from ..stats.grouping import context_columns
from ..tables.render import Table
from ..tables.summary import table_notes
from .base import Part, table_block

TITLE = "What was compared"
TABLES = ("arms",)
FIGURES: tuple[str, ...] = ()


def arms_table(study) -> Table:
    """One row per (context, variant): its seeds, job count and whether it is paired-ready (CRN)."""
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    data = (jobs.groupby(context + ["variant", "variant_order"], sort=False, dropna=False)
            .agg(seeds=("seed", lambda s: ", ".join(str(x) for x in sorted(s.dropna().unique()))),
                 n=("run", "count"), crn=("crn", "all"), runs=("run", lambda r: ";".join(sorted(r))))
            .reset_index().sort_values("variant_order", kind="stable"))
    rows = [[str(r[c]) for c in context] + [r["variant"], r["seeds"], str(r["n"]), "yes" if r["crn"] else "no"]
            for r in data.to_dict("records")]
    return Table("arms", "Every arm of every comparison context with its seeds; paired-ready: every job records "
                 "common random numbers (CRN).", context + ["input variant", "seeds", "n", "paired-ready (CRN)"],
                 rows, data.drop(columns="variant_order"), numeric={len(context) + 2})


def trained_lines(jobs) -> list[str]:
    """When the included jobs finished (results.json finished_at) and under which training source
    (fingerprint.code_sha), so a regenerated report says which run it reads."""
    if jobs.empty or "finished_at" not in jobs:
        return []
    days = sorted(jobs["finished_at"].dropna().astype(str).str[:10].unique())
    span = (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}") if days else "unknown"
    shas = sorted(jobs["code_sha"].dropna().astype(str).unique()) if "code_sha" in jobs else []
    return [f"- Trained: finished {span} ({RESULTS_FILE} finished_at)"
            + (f"; training source {', '.join(shas)} (fingerprint.code_sha)" if shas else "")]


def notes(results) -> list[str]:
    return results.study.notes + results.notes + (table_notes(results.compared, results.options.baseline)
                                                  if results.has_jobs else [])


def build(results, figures_dir: Path) -> Part:
    study = results.study
    jobs = study.included_jobs
    lines = [f"## {TITLE}", "",
             f"- Sources: {', '.join(f'`{s}`' for s in study.sources)}",
             f"- Jobs found: {len(study.jobs)}; included: {len(jobs)}; excluded: {len(study.excluded_jobs)}",
             f"- Sweeps: {', '.join(sorted(jobs['sweep'].astype(str).unique())) or 'none'}",
             f"- Data sets: {', '.join(sorted(jobs['data'].astype(str).unique())) or 'none'}",
             f"- Model presets: {', '.join(sorted(jobs['model'].astype(str).unique())) or 'none'}",
             *trained_lines(jobs), *[f"- Ran: {note}" for note in results.options.notes], ""]
    part = Part()
    if not jobs.empty:
        table = arms_table(study)
        part.tables["arms"] = table
        lines += table_block("Arms", table, level="###", limit=results.options.inline_rows)
    lines += ["## Caveats and notes", "", *([f"- {n}" for n in notes(results)] or ["- none"]), ""]
    part.lines = lines
    return part
