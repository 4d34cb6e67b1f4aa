"""Matrix vs seed variance table, for studies that cross GF(2) matrix seeds with run seeds
(sweeps/gf2_matrices); its rows are stats/variance.py's variance_rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats.grouping import metric_title, shown_context
from .render import Table

def _share(r: dict, name: str) -> str:
    est, lo, hi = r[f"share_{name}"], r[f"share_{name}_low"], r[f"share_{name}_high"]
    return "n/a" if math.isnan(est) else f"{100 * est:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]"


def variance_table(study, data: pd.DataFrame) -> Table | None:
    """The table of stats/variance.py variance_rows (None when no matrix x seed design was run)."""
    if data.empty:
        return None
    from . import numfmt

    shown = shown_context(study.jobs)
    columns = shown + ["code", "metric", "matrices × seeds", "SD matrix", "SD seed", "SD residual",
                       "matrix share [95% CI]", "seed share [95% CI]", "p (matrix)", "p (seed)"]
    rows = []
    for r in data.to_dict("records"):
        sds = [np.sqrt(r[f"var_{k}"]) for k in ("matrix", "seed", "resid")]
        dd = numfmt.decimals_for([s for s in sds if s > 0], [r["mean"]])
        rows.append([str(r[c]) for c in shown] + [
            r["group"], metric_title(r["metric"]), f"{r['n_matrices']} × {r['n_seeds']}",
            *[numfmt.num(s, dd) for s in sds], _share(r, "matrix"), _share(r, "seed"),
            numfmt.p_value(r["p_matrix"]), numfmt.p_value(r["p_seed"])])
    caption = ("Where the spread comes from when GF(2) matrix seeds are crossed with run seeds: a two-way random-"
               "effects decomposition (ANOVA estimates) of each final metric into matrix-to-matrix, seed-to-seed and "
               "residual (matrix × seed interaction plus noise) variance. SD: square root of each component, in "
               "the metric's units (perplexities: log units). Share: component / total, with 95% generalized confidence "
               "intervals (chi-square pivots of the mean squares; 95–97% coverage when simulated under this model at "
               "5 × 3 and 10 × 3). p: F test of no matrix / no seed effect. See Methods.")
    numeric = set(range(len(shown) + 2, len(columns)))
    return Table("matrix_seed_variance", caption, columns, rows, data, set(), numeric)
