"""What a report section returns, and the Markdown pieces every section uses.

A section's text refers to its figures as `figure_ref(stem)`; report.py numbers the figures in the
order the sections show them and writes the numbers in. A long table stays out of report.md: the
text links its files (Markdown, LaTeX, CSV) and says what it holds, so report.md stays readable,
and every number still traces to a run directory through the CSV and tables/jobs.csv.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..figures.style import FigureFile
from ..tables.render import MAX_INLINE_ROWS, Table, to_markdown

REF = "[[figure:{stem}]]"
# Generated blocks (analysis/summaries.py): text the analysis writes and can rewrite from the report's own
# tables; the lint reads everything outside them as hand-written.
BEGIN, END = "<!-- generated:{key}:begin -->", "<!-- generated:{key}:end -->"


def wrap(key: str, lines: list[str]) -> list[str]:
    """`lines` between the markers of generated block `key`."""
    return [BEGIN.format(key=key), *lines, END.format(key=key)]


def inline_table(table: Table) -> list[str]:
    """A table's Markdown as a generated block `table:NAME` (it must equal tables/NAME.md)."""
    return wrap(f"table:{table.name}", to_markdown(table).rstrip("\n").splitlines())


@dataclass
class Part:
    """One section of report.md: its Markdown lines, the tables it writes and the figures it drew."""
    lines: list[str] = field(default_factory=list)
    tables: dict[str, Table] = field(default_factory=dict)
    figures: list[FigureFile] = field(default_factory=list)

    def add(self, figure: FigureFile | None) -> FigureFile | None:
        if figure is not None:
            self.figures.append(figure)
        return figure


def figure_ref(stem: str) -> str:
    """'Figure N' once the report has numbered its figures."""
    return REF.format(stem=stem)


def embed(figure: FigureFile | None) -> list[str]:
    """The figure, its number and caption, and its PDF."""
    if figure is None:
        return []
    ref = figure_ref(figure.stem)
    return [f"![{ref}](figures/{figure.stem}.png)", "",
            f"*{ref}.* {figure.caption} ([PDF](figures/{figure.stem}.pdf))", ""]


def files(table: Table) -> str:
    return (f"Files: [`tables/{table.name}.md`](tables/{table.name}.md), "
            f"[`.tex`](tables/{table.name}.tex), [`.csv`](tables/{table.name}.csv)")


def table_block(title: str, table: Table, level: str = "##", limit: int = MAX_INLINE_ROWS) -> list[str]:
    """A titled table: caption and rows, or, past `limit` rows, the caption and where the rows are."""
    heading = [f"{level} {title}", "", table.caption, ""]
    if len(table.rows) > limit:
        return heading + [f"{len(table.rows)} rows, too long to read here; every row is in the files: "
                          f"[`tables/{table.name}.csv`](tables/{table.name}.csv), [`.md`](tables/{table.name}.md), "
                          f"[`.tex`](tables/{table.name}.tex).", ""]
    return heading + [*inline_table(table), "", files(table), ""]
