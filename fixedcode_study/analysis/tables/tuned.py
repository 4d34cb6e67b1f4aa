"""The learning-rate grid of a tuning study, with each arm's chosen setting (fixedcode_study.analysis.stats.tuning)."""

from __future__ import annotations

import math

import pandas as pd

from . import numfmt
from ..stats.grouping import metric_title, shown_context
from .render import Table


def _cell(row: dict, metric: str, decimals: int) -> str:
    mean, std, n = row.get(f"{metric}|mean"), row.get(f"{metric}|std"), row.get(f"{metric}|n", 0)
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    return numfmt.mean_cell(mean, std, int(n), math.nan, decimals)


def tuned_grid_table(study, grid: pd.DataFrame) -> Table:
    select, report = grid.attrs["select"], grid.attrs["report"]
    metrics = [select, *report]
    decimals = {}
    for m in metrics:
        stds = grid.get(f"{m}|std", pd.Series(dtype=float))
        decimals[m] = numfmt.decimals_for(stds[grid.get(f"{m}|n", 0) >= 2], grid.get(f"{m}|mean", []))
    shown = shown_context(study.jobs)
    columns = shown + ["arm", "setting", f"select on: {metric_title(select)}",
                       *[f"report: {metric_title(m)}" for m in report], "chosen"]
    rows, bold = [], set()
    for r, row in enumerate(grid.to_dict("records")):
        rows.append([str(row[c]) for c in shown] + [row["arm"], row["setting"]]
                    + [_cell(row, m, decimals[m]) for m in metrics] + ["best" if row["chosen"] else ""])
        if row["chosen"]:
            bold.update((r, c) for c in range(len(shown), len(columns)))
    caption = (f"Tuning grid: every setting of every arm, mean ± sample std over seeds (n). Per arm the setting with "
               f"the lowest mean {metric_title(select)} is chosen (bold); the arms are then compared on "
               f"{metric_title(report[0])}"
               + (", which the training side computes on validation windows disjoint from the selection half."
                  if select != report[0] and "report" in report[0] else
                  " (the same data: no held-out split was recorded)."))
    numeric = set(range(len(shown) + 2, len(columns) - 1))
    return Table("tuned_lr", caption, columns, rows, grid, bold, numeric)
