"""A study's compositions in the report: its compose records (read/compose.py) summarised per arm, the
stitch cost at each block boundary and the barrier path (stats/composition.py), and the rows of the
comparisons table on the composition measures (stats/comparisons.py: one table, one Holm procedure per
family; primary where the study declares them, read/declared.py `measures:`).

There is a composition only where the report's run directories hold compose records of its jobs; every
other report has none, so its files are the same as before the section existed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..read.compose import PRIMARY_MEASURES, ComposeData, is_measure
from ..stats.composition import along_path, arm_rows, by_k
from ..stats.grouping import context_columns

# the measures the per-arm table shows: the declarable four, and the probability mixture's gain beside them
SHOWN = (*PRIMARY_MEASURES, "ensemble_mixture_gain")


@dataclass
class Composition:
    data: ComposeData
    context: list[str]
    arms: pd.DataFrame        # per (context, arm, measure): n pairs, mean, sd, t interval
    by_k: pd.DataFrame        # per (context, arm, kind, k): stitched loss minus the members' mean
    path: pd.DataFrame        # per (context, arm, alpha): the excess over the endpoints' line
    rows: pd.DataFrame        # the comparison rows on the composition measures (copied, never recomputed)

    @property
    def pairs(self) -> pd.DataFrame:
        return self.data.pairs


def composition(data: ComposeData, comparisons: pd.DataFrame, study) -> Composition | None:
    """The report's composition (module docstring), or None without compose records."""
    if not data.any:
        return None
    context = context_columns(study.jobs)
    order = dict(zip(data.pairs["variant"], data.pairs["variant_order"], strict=True))
    # the arms in the report's order, each arm's pairs by seed (the records are read in path order)
    data.pairs = data.pairs.sort_values([*context, "variant_order", "seed_a"], kind="stable").reset_index(drop=True)
    rows = comparisons[comparisons["metric"].map(is_measure)] if not comparisons.empty else comparisons
    return Composition(data, context, arm_rows(data.points, context, list(SHOWN)),
                       by_k(data.stitches, context, order), along_path(data.paths, context, order),
                       rows.reset_index(drop=True))
