"""The composition study's reading: its question answered from the primary rows on the composition measures alone.

sweeps/composition.yaml asks whether two models that share a fixed input combine differently from two
with learned tables. Each primary row (a fixed arm − learned on one measure, stats/comparisons.py) is
read in the words its verdict allows (tables/measure_reading.py: the frame it shares with the
adaptation reading) with the Δ, CI and Holm p it rests on, and what that verdict means on that measure:

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
from ..stats.equivalence import ALPHA, BETTER, EQUIVALENT, INCONCLUSIVE, WORSE
from .measure_reading import MeasureReading, read_rows

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
READING = MeasureReading(PRIMARY_MEASURES, SAYS, kind="composition measure", unit="pair", units="pairs of models",
                         member=is_measure)


def composition_reading(comparisons: pd.DataFrame | None, alpha: float = ALPHA) -> list[str]:
    """Markdown lines (no heading) of the reading, or [] without primary rows on the composition measures."""
    return read_rows(READING, comparisons, alpha)
