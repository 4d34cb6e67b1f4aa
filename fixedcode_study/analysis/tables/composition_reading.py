"""The composition study's reading: its question answered from the primary rows on the composition measures alone.

sweeps/composition.yaml asks whether two models that share a fixed input combine differently from two
with learned tables. Each primary row (a fixed arm − learned on one measure, stats/comparisons.py) is
read in the words its verdict allows (stats/equivalence.py verdict(), the Findings' vocabulary,
tables/findings.py) with the Δ, CI and Holm p it rests on, and what that verdict means on that measure:

- ensemble gain (up): *better* = a's pairs gain more from averaging their logits than b's;
- stitch cost, identity or affine (down): *better* = stitching a's models costs less than b's;
- barrier (down): *better* = the straight line between a's models' weights rises less above its
  endpoints than b's;
and for every measure *equivalent* = the two arms are within the margin, *inconclusive* = a difference
is not shown either way. A closing line per arm lists its verdicts over the measures: a list, not a
test across measures.

Works from compare()'s frame or comparisons.csv read back, so analysis/summaries.py rewrites the block
from the committed table.
"""

from __future__ import annotations

import pandas as pd

from ..read.compose import PRIMARY_MEASURES, is_measure
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
# What a verdict of a − b says on each measure ({a}, {b}: the arms; {margin}: the row's margin).
SAYS = {
    "ensemble_gain": {BETTER: "{a}'s pairs gain more from averaging their logits than {b}'s",
                      WORSE: "{a}'s pairs gain less from averaging their logits than {b}'s",
                      EQUIVALENT: "the two arms' ensemble gains are within {margin} nats of each other",
                      INCONCLUSIVE: "a difference in ensemble gain is not shown either way"},
    "stitch_cost_identity": {BETTER: "stitching {a}'s models through the identity costs less than {b}'s",
                             WORSE: "stitching {a}'s models through the identity costs more than {b}'s",
                             EQUIVALENT: "the two arms' identity-stitch costs are within {margin} nats of each other",
                             INCONCLUSIVE: "a difference in what an identity stitch costs is not shown either way"},
    "stitch_cost_affine": {BETTER: "stitching {a}'s models through a trained affine map costs less than {b}'s",
                           WORSE: "stitching {a}'s models through a trained affine map costs more than {b}'s",
                           EQUIVALENT: "the two arms' affine-stitch costs are within {margin} nats of each other",
                           INCONCLUSIVE: "a difference in what an affine stitch costs is not shown either way"},
    "barrier": {BETTER: "the straight line between {a}'s models' weights rises less above its endpoints than {b}'s",
                WORSE: "the straight line between {a}'s models' weights rises more above its endpoints than {b}'s",
                EQUIVALENT: "the two arms' barriers are within {margin} nats of each other",
                INCONCLUSIVE: "a difference in the loss barrier is not shown either way"},
}
TALLY = (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE)


def _verdict(row) -> str:
    """The verdict as the reading groups it: a nonzero difference inside the margin is equivalent."""
    return EQUIVALENT if row.verdict == EQUIVALENT_NONZERO else str(row.verdict)


def _says(row) -> str:
    verdict = _verdict(row)
    if verdict == IDENTICAL:
        return "identical at every pair (no spread, Δ = 0)"
    if verdict == NOT_AVAILABLE:
        return "not tested (fewer than two pairs on a side)"
    words = SAYS.get(str(row.metric), {}).get(verdict)
    margin = str(row.margin_label).lstrip("±") if isinstance(row.margin_label, str) else "the margin"
    return words.format(a=row.variant_a, b=row.variant_b, margin=f"±{margin}") if words else verdict


def _how(rows: pd.DataFrame) -> str:
    tests = set(rows["test"])
    if tests == {PAIRED}:
        return f"paired over {int(rows['n_pairs'].min())} pairs of models at the same seeds"
    if tests <= {PAIRED, EXACT}:
        return "paired over the pairs of models at the same seeds"
    return "Welch over the two arms' pairs of models (not all members record common random numbers)"


def composition_reading(comparisons: pd.DataFrame, alpha: float = ALPHA) -> list[str]:
    """Markdown lines (no heading) of the reading, or [] without primary rows on the composition measures."""
    if comparisons is None or comparisons.empty or "family" not in comparisons:
        return []
    rows = comparisons[(comparisons["family"] == PRIMARY) & comparisons["metric"].map(is_measure)]
    if rows.empty:
        return []
    context = [c for c in CONTEXT if c in rows and rows[c].nunique(dropna=False) > 1]
    order = {m: i for i, m in enumerate(PRIMARY_MEASURES)}
    lines = [f"Each line reads one primary row (a − b on one composition measure, α = {alpha:g} on the p's "
             f"Holm-adjusted over the primary family, {len(comparisons[comparisons['family'] == PRIMARY])} rows) in "
             "the words its verdict allows, with what that verdict means on that measure; nothing here goes beyond "
             "the rows.", ""]
    keys = [*context, "comparison"]
    for key, group in rows.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        group = group.assign(_m=group["metric"].map(order)).sort_values("_m", kind="stable")
        where = "".join(f" ({c} {v})" for c, v in zip(context, key[:-1], strict=True))
        lines.append(f"- **{key[-1]}**{where}, {_how(group)}:")
        for row in group.itertuples(index=False):
            lines.append(f"  - {metric_title(row.metric)}: {cited(row)}; that is, {_says(row)}.")
        counts = [(v, int((group.apply(_verdict_of, axis=1) == v).sum())) for v in TALLY]
        listed = ", ".join(f"{v} on {n}" for v, n in counts if n)
        lines.append(f"  - {group['variant_a'].iloc[0]}'s verdicts over the {len(group)} measures: {listed} "
                     "(a list of the rows above, not a test across measures).")
    return lines


def _verdict_of(row: pd.Series) -> str:
    return EQUIVALENT if row["verdict"] == EQUIVALENT_NONZERO else str(row["verdict"])
