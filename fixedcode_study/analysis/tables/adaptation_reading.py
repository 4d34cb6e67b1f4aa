"""The new-tokens study's reading: its question answered from the primary rows on the adaptation measures alone.

sweeps/new_tokens.yaml asks whether a model with a fixed input code learns tokens held out of its
pretraining faster, or forgets less, than one whose learned table must initialise their rows. Each
primary row (a fixed arm − learned on one measure at the end of adaptation, learned read at its mean
init: read/adapt.py REFERENCE_INIT) is read in the words its verdict allows (tables/measure_reading.py,
the frame it shares with the composition reading) with the Δ, CI and Holm p it rests on, and what that
verdict means on that measure (each a loss: lower is better):

- loss on new tokens: *better* = after adaptation a's models predict the held-out tokens with lower loss;
- loss after a new token: *better* = a's models predict the token that follows one with lower loss;
- loss on other tokens: *better* = a's models end with lower loss on every other token.

These are end-of-adaptation losses: they carry whatever gap the arms bring from pretraining, which the
exploratory rows of each loss's change from step 0 leave out; the reading says so and goes no further.
"""

from __future__ import annotations

import pandas as pd

from ..read.adapt import PRIMARY_MEASURES, REFERENCE_INIT
from ..stats.equivalence import ALPHA, BETTER, EQUIVALENT, INCONCLUSIVE, WORSE
from .measure_reading import MeasureReading, read_rows

# What a verdict of a − b says on each measure ({a}, {b}: the arms; {margin}: the row's margin).
SAYS = {
    "adapt_heldout_loss": {
        BETTER: "after adaptation {a}'s models predict the new tokens with lower loss than {b}'s",
        WORSE: "after adaptation {a}'s models predict the new tokens with higher loss than {b}'s",
        EQUIVALENT: "the two arms' losses on the new tokens after adaptation are within {margin} nats of each other",
        INCONCLUSIVE: "a difference in the loss on the new tokens after adaptation is not shown either way"},
    "adapt_after_heldout_loss": {
        BETTER: "after adaptation {a}'s models predict the token after a new token with lower loss than {b}'s",
        WORSE: "after adaptation {a}'s models predict the token after a new token with higher loss than {b}'s",
        EQUIVALENT: "the two arms' losses after a new token are within {margin} nats of each other",
        INCONCLUSIVE: "a difference in the loss after a new token is not shown either way"},
    "adapt_other_loss": {
        BETTER: "after adaptation {a}'s models have lower loss on the other tokens than {b}'s",
        WORSE: "after adaptation {a}'s models have higher loss on the other tokens than {b}'s",
        EQUIVALENT: "the two arms' losses on the other tokens after adaptation are within {margin} nats of each other",
        INCONCLUSIVE: "a difference in the loss on the other tokens after adaptation is not shown either way"},
}
LEAD = (f" A learned arm is read at its `{REFERENCE_INIT}` init of the new rows. The losses are those at the end of "
        "adaptation, so each carries the gap the arms bring from pretraining (the exploratory rows of each loss's "
        "change from step 0 leave it out); a verdict here is about where the arms end, not how much each learned.")
READING = MeasureReading(PRIMARY_MEASURES, SAYS, kind="adaptation measure", unit="seed", units="seeds",
                         paired_at=" (each seed's arms on the same adaptation batches)", lead=LEAD)


def adaptation_reading(comparisons: pd.DataFrame | None, alpha: float = ALPHA) -> list[str]:
    """Markdown lines (no heading) of the reading, or [] without primary rows on the adaptation measures."""
    return read_rows(READING, comparisons, alpha)
