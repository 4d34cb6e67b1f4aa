"""The Findings of a report: one sentence per primary comparison row, written from its verdict alone.

Only rows of the declared primary family (stats/comparisons.py) are findings; exploratory rows
have no verdict and no sentence.

Readings written by hand drifted past their tables (issue 24: "worse" for inconclusive rows,
equivalence claims with TOST Holm p = 1). Here each row's sentence is chosen by its verdict
(stats/equivalence.py verdict(), every value it returns) and carries the numbers that verdict rests
on, so no sentence can say more than its row:

- better / worse: "a is *worse* than b", Δ, its CI and the Holm p of Δ = 0;
- equivalent / equivalent (Δ ≠ 0): "a and b are *equivalent* within ±margin", Δ, CI, TOST Holm p
  (and the Holm p of the nonzero difference);
- inconclusive: "*inconclusive*: neither a difference ... nor equivalence ... is shown", CI, both
  Holm p's and the seed pairs that would give 80% power to each (stats/power.py). An inconclusive
  sentence never uses the words better, worse or equivalent;
- identical (no spread, Δ = 0) and n/a (n<2, not tested) say just that.

A closing note says how many seed pairs would settle every inconclusive row. Works from compare()'s
frame or its comparisons.csv read back (so committed tables can be re-read: the `decimals` column
keeps the report's precision per metric, and analysis/summaries.py regenerates the Findings from it).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
from scipy import stats as sps

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
from ..stats.power import POWER, seeds_columns
from . import numfmt
from .compare import delta_cells, seeds_cells

CONTEXT = ("data", "model")
VERDICT_ORDER = (WORSE, BETTER, EQUIVALENT, EQUIVALENT_NONZERO, INCONCLUSIVE, IDENTICAL, NOT_AVAILABLE)


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _p(label: str, value) -> str:
    """'Holm p = 0.043', 'Holm p < 0.001' (the table's precision, as a phrase)."""
    shown = numfmt.p_value(float(value)) if value is not None else "n/a"
    return f"{label} < {shown[1:]}" if shown.startswith("<") else f"{label} = {shown}"


def _where(row, context: list[str]) -> str:
    return "".join(f" ({c} {getattr(row, c)})" for c in context)


def _numbers(row, decimals: int) -> str:
    delta, ci = delta_cells(row, decimals)
    return f"Δ = {delta}, 95% CI {ci}"


def _seeds(row, alpha: float) -> str:
    """The seeds-needed clause of an inconclusive row (Holm-safe numbers, then the single-test ones)."""
    if row.test != PAIRED:
        return (" Seeds needed: not computed, the runs are not paired (no sd of paired differences); "
                "runs that share seeds under common random numbers would be.")
    diff, equiv = seeds_cells(row)
    present = int(row.n_pairs)

    def clause(shown: str, holm_safe, alone, what: str) -> str:
        if shown.startswith("—"):
            return f"no number of seed pairs can {what} ({shown[1:].strip(' ()')})"
        alone = float(alone)
        extra = (f" ({round(alone):,} at α = {alpha:g} alone)"
                 if math.isfinite(alone) and round(alone) != round(float(holm_safe)) else "")
        # the noncentral t is right-skewed at few dof, so even the present n can have that power
        run = f" (no more than the {present} run here)" if float(holm_safe) <= present else ""
        return f"{shown} to {what}{extra}{run}"

    margin = f"show equivalence within {row.margin_label}"
    return (f" Seed pairs for {POWER:.0%} power at the observed Δ and sd of the paired differences (Holm-safe α/m): "
            f"{clause(diff, row.seeds_for_difference, row.seeds_for_difference_unadjusted, 'show Δ ≠ 0')}; "
            f"{clause(equiv, row.seeds_for_equivalence, row.seeds_for_equivalence_unadjusted, margin)}.")


def finding(row, decimals: int, context: list[str] = (), alpha: float = ALPHA) -> str:
    """The one sentence (a Markdown bullet) a comparison row's verdict allows."""
    a, b, metric, verdict = row.variant_a, row.variant_b, metric_title(row.metric), row.verdict
    pair = f"**{a} − {b}**, {metric}{_where(row, context)}"
    numbers = _numbers(row, decimals)
    exact = row.test == EXACT
    untested = "no spread between seeds, so Δ is exact and untested"
    if verdict in (BETTER, WORSE):
        evidence = untested if exact else _p("Holm p", row.p_holm)
        return f"- {pair}: {a} is *{verdict}* than {b}; {numbers}, {evidence}."
    if verdict == EQUIVALENT:
        return (f"- {pair}: {a} and {b} are *equivalent* within {row.margin_label}; {numbers}, "
                f"{_p('TOST Holm p', row.tost_p_holm)}.")
    if verdict == EQUIVALENT_NONZERO:
        evidence = untested if exact else (f"{_p('TOST Holm p', row.tost_p_holm)}; the difference is nonzero "
                                           f"({_p('Holm p', row.p_holm)}) but inside the margin")
        return f"- {pair}: {a} and {b} are *equivalent* within {row.margin_label}; {numbers}, {evidence}."
    if verdict == INCONCLUSIVE:
        margin = _text(row.margin_label)
        equivalence = (f"equivalence within {margin} ({_p('TOST Holm p', row.tost_p_holm)})"
                       if margin and margin != "none" else "equivalence (this metric has no margin)")
        return (f"- {pair}: *inconclusive*: neither a difference ({_p('Holm p', row.p_holm)}) nor "
                f"{equivalence} is shown; {numbers}.{_seeds(row, alpha)}")
    if verdict == IDENTICAL:
        return f"- {pair}: *identical* at every seed (no spread, Δ = 0): nothing to test."
    if verdict == NOT_AVAILABLE:
        return (f"- {pair}: *not tested* ({verdict}): fewer than two seeds on a side, so Δ = {delta_cells(row, decimals)[0]} "
                "says nothing about seed-to-seed noise.")
    raise ValueError(f"unknown verdict {verdict!r}")  # a new verdict must get its own sentence here


def _settle_note(rows: pd.DataFrame) -> list[str]:
    """How many seed pairs would settle the inconclusive paired rows, and how uncertain that number is."""
    rows = rows[(rows["verdict"] == INCONCLUSIVE) & (rows["test"] == PAIRED)]
    if rows.empty:
        return []
    # a row settles (reaches any verdict) once either test has the power: the smaller number suffices
    settle = np.fmin(rows["seeds_for_difference"].astype(float), rows["seeds_for_equivalence"].astype(float))
    finite = settle[np.isfinite(settle)]
    never = len(settle) - len(finite)
    dof = int(rows["n_pairs"].min()) - 1
    low, high = (math.sqrt(dof / sps.chi2.ppf(q, dof)) for q in (0.975, 0.025))
    lines = []
    if len(finite):
        lines.append(
            f"- **Seeds that would settle the inconclusive rows:** a paired study of {round(finite.max()):,} seed "
            f"pairs would give {'every' if never == 0 else 'each settleable'} inconclusive paired row "
            f"({len(finite)}) at least "
            f"{POWER:.0%} power to reach a verdict (a difference or equivalence), if its observed Δ and sd were "
            f"the truth; per row the smaller of its two numbers above, the largest over rows, at α/m of the "
            f"primary family's Holm tests (a different family size changes them).")
    if never:
        lines.append(f"- {never} inconclusive row(s) no number of seed pairs would settle at the observed Δ "
                     "(see their reasons above).")
    lines.append(f"- These are plug-in numbers: the 95% interval of an sd from {dof + 1} pairs runs from "
                 f"{low:.2f} to {high:.1f} times the estimate, and the seeds needed scale with its square.")
    return lines


def _missing_seeds(diffs: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """A table from before the seeds columns existed gets them recomputed from its own rows."""
    if "seeds_for_difference" in diffs:
        return diffs
    return pd.concat([diffs, seeds_columns(diffs, alpha)], axis=1)


def findings_lines(diffs: pd.DataFrame, decimals: dict[str, int] | None = None, alpha: float = ALPHA) -> list[str]:
    """Markdown lines of the Findings section (no heading) for a comparison table."""
    if diffs is None or diffs.empty:
        return ["- No comparison could be made, so there are no findings."]
    diffs = _missing_seeds(diffs, alpha)
    exploratory = int((diffs["family"] != PRIMARY).sum()) if "family" in diffs else 0
    if "family" in diffs:
        diffs = diffs[diffs["family"] == PRIMARY]
    if diffs.empty:
        return [f"- No primary comparison was declared or could be made, so there are no findings; the "
                f"{exploratory} rows of the comparisons table are exploratory."]
    if not decimals and "decimals" in diffs:   # the report's precision, kept in comparisons.csv
        decimals = {m: int(d) for m, d in zip(diffs["metric"], diffs["decimals"], strict=True) if pd.notna(d)}
    decimals = decimals or {}
    context = [c for c in CONTEXT if c in diffs and diffs[c].nunique(dropna=False) > 1]
    counts = Counter(diffs["verdict"])
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER if counts[v])
    others = (f" The other {exploratory} row(s) of the comparisons table are exploratory and are not findings."
              if exploratory else "")
    lead = (f"Each line states one primary comparison's verdict and the numbers it rests on (a − b; α = {alpha:g} "
            f"on the p's Holm-adjusted over the primary family); nothing here goes beyond the table. "
            f"{len(diffs)} primary rows: {summary}.{others}")
    lines = [lead, ""]
    lines += [finding(row, decimals.get(row.metric, 3), context, alpha) for row in diffs.itertuples(index=False)]
    note = _settle_note(diffs)
    return lines + ([""] + note if note else [])
