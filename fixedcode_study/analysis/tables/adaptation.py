"""The adaptation section's tables: each arm's measures per init of its new rows, and the numbers the
curves figure draws.

  adaptation_arms    per arm and init: seeds, and per measure the mean over seeds with its 95% t interval
                     (read/adapt.py MEASURES: the end of adaptation; the mass at step 0)
  adaptation_curves  per arm, init and measured step: the mean over seeds of each measure
Each CSV is the frame itself (full precision).
"""

from __future__ import annotations

import pandas as pd
from scipy import stats as sps

from ..read.adapt import MEASURES, PREFIX
from ..stats.grouping import metric_title
from . import numfmt
from .render import Table

ARMS, CURVES = "adaptation_arms", "adaptation_curves"
NAMES = (ARMS, CURVES)


def arm_frame(runs: pd.DataFrame, context: list[str]) -> pd.DataFrame:
    """Per (context, arm, init, measure): n seeds, mean, sd and the 95% t interval over the seeds."""
    rows = []
    for key, group in runs.groupby([*context, "variant", "init"], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in MEASURES:
            values = group[metric].dropna().astype(float)
            n = len(values)
            mean, sd = (values.mean(), values.std(ddof=1)) if n else (float("nan"), float("nan"))
            half = sps.t.ppf(0.975, n - 1) * sd / n ** 0.5 if n > 1 else float("nan")
            rows.append({**dict(zip([*context, "variant", "init"], key)), "metric": metric, "n": n, "mean": mean,
                         "sd": sd if n > 1 else float("nan"), "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(rows)


def curve_frame(curves: pd.DataFrame, context: list[str]) -> pd.DataFrame:
    """Per (context, arm, init, step): the mean over seeds of each measure, and how many seeds."""
    measures = [m.removeprefix(PREFIX) for m in MEASURES]
    keys = [*context, "variant", "init", "step", "tokens"]
    grouped = curves.groupby(keys, sort=False, dropna=False)
    return grouped[measures].mean().join(grouped.size().rename("n")).reset_index()


def arms_table(frame: pd.DataFrame, context: list[str]) -> Table:
    wide = []
    for key, group in frame.groupby([*context, "variant", "init"], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        by_metric = group.set_index("metric")
        cells = [*(str(k) for k in key), str(int(by_metric["n"].max()))]
        for metric in MEASURES:
            r = by_metric.loc[metric]
            dd = 4 if metric.endswith("mass") else 3
            ci = "" if pd.isna(r.ci_low) else f" [{r.ci_low:.{dd}f}, {r.ci_high:.{dd}f}]"
            cells.append(f"{numfmt.num(r['mean'], dd)}{ci}")
        wide.append(cells)
    columns = [*context, "arm", "init", "seeds", *(metric_title(m) for m in MEASURES)]
    caption = ("Each arm's models after adaptation to their held-out tokens, per init of a learned table's new rows "
               "(a fixed code: `code`): the mean over seeds and its 95% t interval of the loss where the target is a "
               "held-out token, where the input is one, and everywhere else (nats per token, at the last step), and "
               "of the probability on the held-out set at step 0. The comparisons read learned's `mean` init.")
    first = len(context) + 2
    return Table(ARMS, caption, columns, wide, frame.reset_index(drop=True), numeric=set(range(first, len(columns))))


def curves_table(frame: pd.DataFrame, context: list[str]) -> Table:
    measures = [m.removeprefix(PREFIX) for m in MEASURES]
    columns = [*context, "arm", "init", "step", "tokens", "seeds", *measures]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), str(r.init), str(r.step), str(r.tokens),
              str(r.n), *(numfmt.num(getattr(r, m), 4) for m in measures)] for r in frame.itertuples(index=False)]
    caption = "The adaptation curves: at each measured step, the mean over seeds of each measure (the figure's numbers)."
    first = len(context) + 2
    return Table(CURVES, caption, columns, cells, frame.reset_index(drop=True),
                 numeric=set(range(first, len(columns))))
