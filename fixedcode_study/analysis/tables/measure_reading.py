"""A study's question read from its primary rows on one set of measures: the shared frame of the
composition and adaptation readings (composition_reading.py, adaptation_reading.py).

Each primary row (a − b on one measure, stats/comparisons.py) is read in the words its verdict allows
(stats/equivalence.py verdict(), the Findings' vocabulary, tables/findings.py) with the Δ, CI and Holm
p it rests on, and what that verdict means on that measure (the caller's `says`). A closing line per
comparison lists its verdicts over the measures: a list, not a test across measures.

Works from compare()'s frame or comparisons.csv read back, so analysis/summaries.py rewrites the
blocks from the committed table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ..stats.core import EXACT, PAIRED
from ..stats.equivalence import (
    ALPHA,
    BETTER,
    EQUIVALENT,
    EQUIVALENT_NONZERO,
    IDENTICAL,
    INCONCLUSIVE,
    NOT_AVAILABLE,
    PRIMARY,
    WORSE,
)
from ..stats.grouping import metric_title
from .continuum_reading import cited

CONTEXT = ("data", "model")
TALLY = (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE)


@dataclass(frozen=True)
class MeasureReading:
    """What one family of measures reads as: its measures in order, what each verdict says on each
    ({a}, {b}: the arms; {margin}: the row's margin), and the words for its units."""
    measures: Sequence[str]
    says: Mapping[str, Mapping[str, str]]
    kind: str                       # "composition measure": what a row is a − b on
    unit: str                       # "pair": one observation of an arm
    units: str                      # "pairs of models": what a paired test pairs
    paired_at: str = " at the same seeds"   # what makes two of them a pair, after the units
    lead: str = ""                  # a sentence after the opening one (what b is read at, say)
    member: Callable[[str], bool] | None = None   # which metrics are the family's; default: `measures`

    def is_measure(self, metric: str) -> bool:
        return self.member(metric) if self.member is not None else metric in self.measures


def _verdict(verdict: str) -> str:
    """The verdict as a reading groups it: a nonzero difference inside the margin is equivalent."""
    return EQUIVALENT if verdict == EQUIVALENT_NONZERO else str(verdict)


def _says(reading: MeasureReading, row) -> str:
    verdict = _verdict(row.verdict)
    if verdict == IDENTICAL:
        return f"identical at every {reading.unit} (no spread, Δ = 0)"
    if verdict == NOT_AVAILABLE:
        return f"not tested (fewer than two {reading.units} on a side)"
    words = reading.says.get(str(row.metric), {}).get(verdict)
    margin = str(row.margin_label).lstrip("±") if isinstance(row.margin_label, str) else "the margin"
    return words.format(a=row.variant_a, b=row.variant_b, margin=f"±{margin}") if words else verdict


def _how(reading: MeasureReading, rows: pd.DataFrame) -> str:
    tests = set(rows["test"])
    if tests == {PAIRED}:
        return f"paired over {int(rows['n_pairs'].min())} {reading.units}{reading.paired_at}"
    if tests <= {PAIRED, EXACT}:
        return f"paired over the {reading.units}{reading.paired_at}"
    return f"Welch over the two arms' {reading.units} (not all record common random numbers)"


def read_rows(reading: MeasureReading, comparisons: pd.DataFrame | None, alpha: float = ALPHA) -> list[str]:
    """Markdown lines (no heading) of the reading, or [] without primary rows on its measures."""
    if comparisons is None or comparisons.empty or "family" not in comparisons:
        return []
    primary = comparisons[comparisons["family"] == PRIMARY]
    rows = primary[primary["metric"].map(reading.is_measure)]
    if rows.empty:
        return []
    context = [c for c in CONTEXT if c in rows and rows[c].nunique(dropna=False) > 1]
    order = {m: i for i, m in enumerate(reading.measures)}
    lines = [f"Each line reads one primary row (a − b on one {reading.kind}, α = {alpha:g} on the p's "
             f"Holm-adjusted over the primary family, {len(primary)} rows) in the words its verdict allows, with "
             f"what that verdict means on that measure; nothing here goes beyond the rows.{reading.lead}", ""]
    for key, group in rows.groupby([*context, "comparison"], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        group = group.assign(_m=group["metric"].map(order)).sort_values("_m", kind="stable")
        where = "".join(f" ({c} {v})" for c, v in zip(context, key[:-1], strict=True))
        lines.append(f"- **{key[-1]}**{where}, {_how(reading, group)}:")
        for row in group.itertuples(index=False):
            lines.append(f"  - {metric_title(row.metric)}: {cited(row)}; that is, {_says(reading, row)}.")
        verdicts = group["verdict"].map(_verdict)
        listed = ", ".join(f"{v} on {n}" for v in TALLY if (n := int((verdicts == v).sum())))
        lines.append(f"  - {group['variant_a'].iloc[0]}'s verdicts over the {len(group)} measures: {listed} "
                     "(a list of the rows above, not a test across measures).")
    return lines
