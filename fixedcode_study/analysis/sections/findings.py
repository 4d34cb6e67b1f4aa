"""Findings: one sentence per primary comparison row, in the words its verdict allows
(tables/findings.py), and where a row shown here is decided in another study's family instead."""

from __future__ import annotations

from pathlib import Path

from ..stats.equivalence import PRIMARY
from ..tables.findings import findings_lines
from .base import Part, wrap

TITLE = "Findings"
TABLES: tuple[str, ...] = ()
FIGURES: tuple[str, ...] = ()


def elsewhere_lines(results) -> list[str]:
    """Rows whose comparison another study file declares primary: there it is decided in that study's
    family, so a verdict here (or its absence) is this family's and says why the two can differ."""
    rows = results.comparisons
    if rows.empty or "primary_in" not in rows:
        return []
    lines = []
    for (family, where), group in rows[rows["primary_in"] != ""].groupby(["family", "primary_in"], sort=False):
        studies = ", ".join(where.split(";"))
        listed = ", ".join(dict.fromkeys(group["comparison"]))
        lines.append(f"- {listed}: also declared primary by {studies} (sweeps/). "
                     + ("Exploratory here: in those studies' reports it is decided in their own family."
                        if family != PRIMARY else
                        "Each of those reports decides it in its own family: on the same jobs the verdict is the same "
                        "when the families are, and may differ through the family's other p-values when not."))
    return lines


def build(results, figures_dir: Path) -> Part:
    if not results.has_jobs:
        return Part()
    # the block is rewritten from tables/comparisons.csv alone (analysis/summaries.py): its `decimals` column
    lines = [f"## {TITLE}", "", *wrap("findings", findings_lines(results.comparisons)), ""]
    elsewhere = elsewhere_lines(results)
    if elsewhere:
        lines += ["Where another study declares the same comparison:", *elsewhere, ""]
    return Part(lines)
