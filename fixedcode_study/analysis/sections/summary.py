"""The report's first screen: the question, the primary comparisons with their verdicts, and the
figure that answers it.

The question and the comparisons are the study's declaration (sweeps/<study>.yaml `primary`,
read/declared.py); the rows are the comparisons' own (results.Results.primary), never re-tested.
With several comparison contexts (a compute ladder's cells, model sizes) the table is one row per
context and one column per comparison, so it stays one screen.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..figures.primary import STEM as FIGURE, primary_figure
from ..stats.equivalence import ALPHA
from ..stats.grouping import metric_title, shown_context
from ..tables import numfmt
from ..tables.code import constant_bit_warnings
from ..tables.compare import delta_cells
from ..tables.render import Table
from ..tables.summary import metric_decimals
from .base import Part, embed, figure_ref, files, inline_table

TITLE = "Primary comparisons"
TABLES = ("primary",)
FIGURES = (FIGURE,)


def study_names(results) -> str:
    sweeps = results.study.included_jobs["sweep"].dropna().astype(str) if results.has_jobs else pd.Series(dtype=str)
    return ", ".join(dict.fromkeys(sweeps)) or "no completed job"


def decimals(results) -> dict[str, int]:
    return metric_decimals(results.compared_summary) if len(results.compared_summary) else {}


def _cell(row, dd: int) -> str:
    delta, ci = delta_cells(row, dd)
    return f"{delta} {ci} *{row.verdict}*"


def primary_table(results) -> Table | None:
    rows = results.primary
    if rows.empty:
        return None
    context = [c for c in shown_context(results.compared.jobs) if c in rows]
    dd = decimals(results).get(rows["metric"].iloc[0], 3)
    if context and rows[context].drop_duplicates().shape[0] > 1:
        comparisons = list(dict.fromkeys(rows["comparison"]))
        columns = context + comparisons
        cells = []
        for key, group in rows.groupby(context, sort=False, dropna=False):
            key = key if isinstance(key, tuple) else (key,)
            by = {r.comparison: _cell(r, dd) for r in group.itertuples(index=False)}
            cells.append([str(k) for k in key] + [by.get(c, "—") for c in comparisons])
        caption = (f"Δ = a − b on {metric_title(rows['metric'].iloc[0])}, [95% CI] and *verdict*, per "
                   f"{' and '.join(context)} (the Holm p of each row is in the comparisons table).")
        return Table("primary", caption, columns, cells, rows.reset_index(drop=True), numeric=set(range(len(context),
                                                                                                    len(columns))))
    columns = ["comparison (a − b)", "metric", "n", "Δ", "95% CI", "Holm p", "verdict"]
    per_metric = decimals(results)   # a family on several measures (a composition study) shows each at its own
    cells = [[r.comparison, metric_title(r.metric), r.n, *delta_cells(r, per_metric.get(r.metric, dd)),
              numfmt.p_value(r.p_holm), r.verdict] for r in rows.itertuples(index=False)]
    caption = "Δ = a − b with its 95% CI, the Holm-adjusted p over the primary family, and the verdict."
    return Table("primary", caption, columns, cells, rows.reset_index(drop=True), numeric={2, 3, 4, 5})


def family_line(results) -> str:
    declaration = results.declared
    rows = results.comparisons
    others = int((rows["family"] != "primary").sum()) if not rows.empty else 0
    if not declaration.any:
        files_ = ", ".join(f"sweeps/{n}.yaml" for n in declaration.undeclared) or "a study file"
        return (f"No primary comparison is declared (`primary:` in {files_}, `study=FILE.yaml` or `primary=A:B`), so "
                f"no row is a finding: all {others} rows of the comparisons table are exploratory.")
    made = len(results.primary)
    on = metric_title(results.finals[0]) if declaration.pairs else ""
    if declaration.measure_pairs:   # a composition study: its comparisons on the measures of its pairs of models
        measures = ", ".join(metric_title(m) for m in declaration.measures)
        on = f"{on} and, for {len(declaration.measure_pairs)} of them, " if on else ""
        kind = ("adaptation measure of the arms' models learning their held-out tokens"
                if declaration.adapt_settings is not None and declaration.compose_settings is None
                else "composition measure of the arms' pairs of models")
        on += f"each {kind} ({measures})"
    return (f"The study declares {declaration.count} comparison(s) in {', '.join(declaration.sources)}: "
            f"{made} primary row(s) here (each declared comparison in each comparison context), on "
            f"{on}, Holm-adjusted over those rows alone (α = {ALPHA})."
            + (f" The other {others} row(s) of the comparisons table are exploratory: adjusted p, no verdict."
               if others else ""))


def build(results, figures_dir: Path) -> Part:
    part = Part()
    lines = [f"# Fixed-code input study: {study_names(results)}", ""]
    if results.declared.question:
        lines += [f"**Question.** {results.declared.question}", ""]
    if results.options.command:
        lines += [f"Generated by `{results.options.command}`.", ""]
    if not results.has_jobs:
        part.lines = lines + ["**No job is completed with final metrics, so there is nothing to compare yet.** "
                              "See *Excluded jobs* below.", ""]
        return part
    warnings = constant_bit_warnings(results.study)
    lines += [f"> **Warning:** {w}" for w in warnings] + ([""] if warnings else [])
    lines += [f"## {TITLE}", "", family_line(results), ""]
    table = primary_table(results)
    if table is not None:
        part.tables["primary"] = table
        context = [c for c in shown_context(results.compared.jobs) if c in results.primary]
        several = bool(context) and results.primary[context].drop_duplicates().shape[0] > 1
        figure = part.add(primary_figure(results.primary, context if several else [], figures_dir))
        lines += [table.caption, "", *inline_table(table), "", files(table), ""]
        lines += embed(figure)
    lines += ["The caveats under *What was compared* apply to every number; the Findings below state each primary "
              "row in its verdict's words." + (f" {figure_ref(FIGURE)} draws the rows." if part.figures else ""), ""]
    part.lines = lines
    return part
