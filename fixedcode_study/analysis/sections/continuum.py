"""The input continuum: the gap to the baseline against each arm's trainable input parameters (figure and
table, results/continuum.py), the study's three questions read from the primary rows
(tables/continuum_reading.py), and where each arm's gap by target frequency is.

Only for runs whose records split the trainable input into token-specific and shared parameters and
whose arms differ in them (results/continuum.py): every other report has no such section, so its
files are the same as before the section existed.
"""

from __future__ import annotations

from pathlib import Path

from ..figures.continuum import STEM as FIGURE
from ..figures.continuum import continuum_figure
from ..stats.grouping import shown_context
from ..tables.breakdown import table_name
from ..tables.continuum import NAME, continuum_table
from ..tables.continuum_reading import continuum_reading
from .base import Part, embed, figure_ref, files, inline_table, wrap

TITLE = "The input continuum"
TABLES = (NAME,)
FIGURES = (FIGURE,)
READING = "continuum"   # the generated block of the reading (analysis/summaries.py rewrites it)
# The figure draws every row; past one context's arms the table stays in its files, so a report of the
# whole study keeps under the 400 lines a reader can take in (tests/analysis/test_analysis_report.py).
INLINE_ROWS = 12
FREQUENCY = "target_frequency"


def frequency_lines(results) -> list[str]:
    """Where each arm's gap per target-frequency bucket is (the loss breakdown section's rows)."""
    rows = results.buckets
    if rows.empty or FREQUENCY not in set(rows["breakdown"]):
        return []
    name = table_name(FREQUENCY)
    return ["### Loss by target frequency", "",
            ("Every arm minus the baseline, and every declared pair, per bucket of the target token's training "
             "frequency: the loss breakdown section's heat map and table (exploratory, Benjamini–Hochberg over every "
             f"tested bucket, no verdict): [`tables/{name}.csv`](tables/{name}.csv), [`.md`](tables/{name}.md)."), ""]


def table_lines(table) -> list[str]:
    if len(table.rows) <= INLINE_ROWS:
        return [table.caption, "", *inline_table(table), "", files(table), ""]
    return [f"{table.caption} {len(table.rows)} rows, in the files: {files(table).removeprefix('Files: ')}.", ""]


def build(results, figures_dir: Path) -> Part:
    frame = results.continuum
    if frame is None or frame.empty:
        return Part()
    baseline = results.options.baseline
    context = [c for c in shown_context(results.compared.jobs) if c in frame]
    table = continuum_table(frame, context, baseline)
    part = Part(tables={NAME: table})
    # one series per model context, named by its model even where only one ran
    figure = part.add(continuum_figure(frame, context or ["model"], baseline, figures_dir))
    lines = [f"## {TITLE}", "",
             f"Each arm's final Δ against {baseline} (its comparison row, copied from the comparisons table) beside "
             "its trainable input parameters, split as the input's interface declares them: token-specific (one row "
             "per token ID: a table, a low-rank factor) or shared (a map every token goes through). "
             + (f"{figure_ref(FIGURE)} draws the table." if figure else ""), "",
             *embed(figure), *table_lines(table)]
    reading = continuum_reading(results.comparisons, frame)
    if reading:
        lines += ["### The study's questions, read from the primary rows", "", *wrap(READING, reading), ""]
    part.lines = lines + frequency_lines(results)
    return part
