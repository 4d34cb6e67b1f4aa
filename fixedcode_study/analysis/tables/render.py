"""Write a display table as Markdown, LaTeX (booktabs) and CSV.

A ``Table`` holds display strings (what a reader sees) plus the raw numbers in ``data``;
the CSV is ``data`` so that every value keeps its run-directory paths and full precision. Every file
is written atomically, as the record's own files are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...record.atomic import atomic_file, write_text

# Tables longer than this go to their files only (report.md links them; analyze's inline_rows= sets a
# report's own limit); the first screen's table is built to stay short.
MAX_INLINE_ROWS = 30


@dataclass
class Table:
    name: str                       # file stem under tables/
    caption: str
    columns: list[str]
    rows: list[list[str]]
    data: pd.DataFrame              # raw values + run paths, written as CSV
    bold: set[tuple[int, int]] = field(default_factory=set)   # (row, column) cells marked best
    numeric: set[int] = field(default_factory=set)            # right-aligned columns


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_SYMBOLS = {"±": r"$\pm$", "↓": r"$\downarrow$", "↑": r"$\uparrow$", "−": "-", "≥": r"$\geq$",
                  "<": r"$<$", ">": r"$>$", "≤": r"$\leq$", "≠": r"$\neq$", "≈": r"$\approx$",
                  "×": r"$\times$", "Δ": r"$\Delta$", "α": r"$\alpha$", "·": r"$\cdot$", "–": "--",
                  "✓": r"$\checkmark$"}


def latex_escape(text: str) -> str:
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    for symbol, command in _LATEX_SYMBOLS.items():
        out = out.replace(symbol, command)
    return out


def _md_escape(text: str) -> str:
    return text.replace("|", r"\|")


def to_markdown(table: Table) -> str:
    align = ["---:" if i in table.numeric else ":---" for i in range(len(table.columns))]
    lines = ["| " + " | ".join(_md_escape(c) for c in table.columns) + " |",
             "| " + " | ".join(align) + " |"]
    for r, row in enumerate(table.rows):
        cells = [f"**{_md_escape(c)}**" if (r, i) in table.bold else _md_escape(c) for i, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _latex_cell(text: str) -> str:
    """Markdown *italics* (reference rows) become \\textit; everything else is escaped text."""
    if len(text) > 2 and text.startswith("*") and text.endswith("*") and not text.startswith("**"):
        return rf"\textit{{{latex_escape(text[1:-1])}}}"
    return latex_escape(text)


def to_latex(table: Table) -> str:
    spec = "".join("r" if i in table.numeric else "l" for i in range(len(table.columns)))
    body = []
    for r, row in enumerate(table.rows):
        cells = [rf"\textbf{{{_latex_cell(c)}}}" if (r, i) in table.bold else _latex_cell(c)
                 for i, c in enumerate(row)]
        body.append(" & ".join(cells) + r" \\")
    return "\n".join([
        r"% requires \usepackage{booktabs}",
        r"\begin{table}[ht]", r"\centering", rf"\caption{{{latex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name}}}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
        " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule",
        *body, r"\bottomrule", r"\end{tabular}", r"\end{table}", "",
    ])


def write_table(table: Table, directory: Path) -> dict[str, Path]:
    """The table as .md, .tex and .csv, each written atomically (record/atomic.py): a reader sees the old
    file or the new one, never half of one."""
    paths = {ext: directory / f"{table.name}.{ext}" for ext in ("md", "tex", "csv")}
    write_text(paths["md"], to_markdown(table))
    write_text(paths["tex"], to_latex(table))
    write_csv(table.data, paths["csv"])
    return paths


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    with atomic_file(path, "w", encoding="utf-8", newline="") as fh:
        frame.to_csv(fh, index=False)
