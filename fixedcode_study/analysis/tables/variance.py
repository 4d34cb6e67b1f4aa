"""Matrix vs seed variance table, for studies that cross GF(2) matrix seeds with run seeds (sweeps/gf2_matrices).

Detected when, within one context and one input, jobs that agree on every other labelling prop
(e.g. min_weight=4, affine=False) span >= 2 values of input_props.matrix_seed and >= 2 run seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats.grouping import (
    COMPARED_FINAL,
    comparison_points,
    context_columns,
    metric_order,
    metric_title,
    shown_context,
)
from ..stats.metrics import to_scale
from .render import Table
from ..stats.variance import complete_grid, decompose
from ..read.variants import variant_label

MATRIX = "input_props.matrix_seed"


def _groups(study):
    """(context key, input, group label, runs) for every matrix x seed design in the study."""
    jobs = study.included_jobs
    if MATRIX not in jobs:
        return
    context = context_columns(study.jobs)
    for ctx, ctx_jobs in jobs.groupby(context, sort=False, dropna=False):
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        for input_name, group in ctx_jobs.groupby("input", sort=False):
            props = study.label_props.get(input_name, [])
            if MATRIX not in props:
                continue
            others = [p for p in props if p != MATRIX]
            keyed = group.assign(_key=group[others].astype(str).agg("|".join, axis=1) if others else "")
            for _, sub in keyed.groupby("_key", sort=False):
                if sub[MATRIX].nunique() >= 2 and sub["seed"].nunique() >= 2:
                    yield ctx, variant_label(input_name, sub.iloc[0], others), sub


def variance_rows(study) -> tuple[pd.DataFrame, list[str]]:
    points = comparison_points(study)
    metrics = metric_order(points, COMPARED_FINAL)
    context = context_columns(study.jobs)
    rows, notes = [], []
    for ctx, label, sub in _groups(study):
        runs = sub.set_index("run")
        for metric in metrics:
            pts = points[points["run"].isin(runs.index) & (points["metric"] == metric)]
            frame = pd.DataFrame({"matrix": runs.loc[pts["run"], MATRIX].to_numpy(),
                                  "seed": runs.loc[pts["run"], "seed"].to_numpy(),
                                  "value": to_scale(pts["value"], metric)})
            grid, dropped = complete_grid(frame, "matrix", "seed")
            if min(grid.shape) < 2:
                continue
            if dropped:
                notes.append(f"matrix x seed variance of {label}, {metric}: incomplete grid, left out "
                             + ", ".join(dropped))
            dec = decompose(grid.to_numpy())
            row = dict(zip(context, ctx, strict=True)) | {
                "group": label, "metric": metric, "n_matrices": dec.n_matrices, "n_seeds": dec.n_seeds,
                "matrices": ";".join(map(str, grid.index)), "seeds": ";".join(map(str, grid.columns)),
                "mean": dec.mean, "p_matrix": dec.p_matrix, "p_seed": dec.p_seed}
            for key, value in dec.estimates.items():
                row[key] = value
                row[f"{key}_low"], row[f"{key}_high"] = dec.ci[key]
            rows.append(row)
    return pd.DataFrame(rows), notes


def _share(r: dict, name: str) -> str:
    est, lo, hi = r[f"share_{name}"], r[f"share_{name}_low"], r[f"share_{name}_high"]
    return "n/a" if math.isnan(est) else f"{100 * est:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]"


def variance_table(study) -> tuple[Table | None, list[str]]:
    data, notes = variance_rows(study)
    if data.empty:
        return None, notes
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
    return Table("matrix_seed_variance", caption, columns, rows, data, set(), numeric), notes
