"""The composition section's tables: the measures per arm, every pair's own numbers, and the numbers the
two figures draw (the stitch cost at each block boundary, the barrier path).

  composition_arms   per arm and measure: pairs, mean, 95% t interval over the pairs, sd (stats/composition.py)
  composition_pairs  one row per compose record: its members' val losses and each measure, and the record
  composition_by_k   per arm, stitch and k: the mean stitched loss minus the members' mean, with its interval
  composition_path   per arm and alpha: the mean excess over the endpoints' line, the pairs' lowest and highest
Each CSV is the frame itself (full precision, with the records' paths).
"""

from __future__ import annotations

import pandas as pd

from ..stats.grouping import metric_title
from . import numfmt
from .render import Table

ARMS, PAIRS, BY_K, PATH = "composition_arms", "composition_pairs", "composition_by_k", "composition_path"
NAMES = (ARMS, PAIRS, BY_K, PATH)
PAIR_MEASURES = ("ensemble_gain", "stitch_cost_identity", "stitch_cost_affine", "barrier")


def _decimals(frame: pd.DataFrame) -> int:
    """One precision for a table of nats: from its smallest spread, as the report's other tables."""
    spread = frame["sd"] if "sd" in frame else pd.Series(dtype=float)
    return min(numfmt.decimals_for(spread.dropna(), frame["mean"].dropna()), 4)


def arms_table(arms: pd.DataFrame, context: list[str]) -> Table:
    dd = _decimals(arms)
    columns = [*context, "arm", "measure", "pairs", "mean", "95% CI", "sd"]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), metric_title(r.metric), str(r.n),
              f"{r.mean:+.{dd}f}", "n/a" if pd.isna(r.ci_low) else f"[{r.ci_low:+.{dd}f}, {r.ci_high:+.{dd}f}]",
              numfmt.num(r.sd, dd)] for r in arms.itertuples(index=False)]
    caption = ("Each arm's composition measures over its pairs of models (nats per token): the mean, the 95% t interval "
               "over the pairs (independent: each seed is in one pair; n − 1 df) and their sd. ↑: the direction in "
               "which two models combine more easily.")
    first = len(context) + 2
    return Table(ARMS, caption, columns, cells, arms.reset_index(drop=True),
                 numeric={first, first + 1, first + 2, first + 3})


def pairs_table(pairs: pd.DataFrame, context: list[str]) -> Table:
    shown = ("loss_a", "loss_b", *PAIR_MEASURES)
    # each column at its own precision: a gain of 0.002 nats beside a loss of 5.4 (four significant digits)
    dd = {c: min(numfmt.decimals_for([], pairs[c].dropna().abs()), 5) for c in shown}
    columns = [*context, "arm", "seeds (a+b)", "val loss a", "val loss b", *(metric_title(m) for m in PAIR_MEASURES),
               "record"]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), str(r.seed),
              *(numfmt.num(getattr(r, c), dd[c]) for c in shown), f"`{r.run}`"] for r in pairs.itertuples(index=False)]
    caption = ("Every pair of models composed (one compose.json each): its members' val losses as composed and its "
               "measures (nats per token; a stitch cost is the mean over k = 1..n_layer of the stitched loss minus "
               "the members' mean).")
    first = len(context) + 2
    return Table(PAIRS, caption, columns, cells, pairs.reset_index(drop=True),
                 numeric=set(range(first, first + 2 + len(PAIR_MEASURES))))


def by_k_table(frame: pd.DataFrame, context: list[str]) -> Table:
    dd = _decimals(frame)
    columns = [*context, "arm", "stitch", "k", "pairs", "mean", "95% CI"]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), str(r.kind), str(r.k), str(r.n),
              f"{r.mean:+.{dd}f}", "n/a" if pd.isna(r.ci_low) else f"[{r.ci_low:+.{dd}f}, {r.ci_high:+.{dd}f}]"]
             for r in frame.itertuples(index=False)]
    caption = ("The stitched model's val loss minus the mean of its members' at each block boundary k (blocks 0..k-1 "
               "of a, then blocks k.. of b), mean over the arm's pairs with its 95% t interval: the stitch figure's "
               "numbers.")
    first = len(context) + 2
    return Table(BY_K, caption, columns, cells, frame.reset_index(drop=True), numeric={first, first + 1, first + 2})


def path_table(frame: pd.DataFrame, context: list[str]) -> Table:
    dd = min(numfmt.decimals_for([], frame["high"].abs()), 4)
    columns = [*context, "arm", "alpha", "pairs", "mean excess", "lowest", "highest"]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), f"{r.alpha:g}", str(r.n),
              *(numfmt.num(getattr(r, c), dd) for c in ("mean", "low", "high"))] for r in frame.itertuples(index=False)]
    caption = ("The straight path between the two members' weights: at each alpha the val loss minus the line between "
               "the endpoints' losses, mean over the arm's pairs and the lowest and highest pair: the barrier "
               "figure's numbers.")
    first = len(context) + 1
    return Table(PATH, caption, columns, cells, frame.reset_index(drop=True),
                 numeric=set(range(first, first + 5)))
