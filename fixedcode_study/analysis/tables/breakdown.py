"""The loss breakdown tables: per bucket, each arm's mean loss, the gap with its test, and its share.

One table per breakdown (target frequency, input code weight under binary16 and under the arm's
own code, position in the window), rows = (comparison, bucket); the rows and their statistics come
from stats/breakdown.py.
"""

from __future__ import annotations

import math

import pandas as pd

from . import numfmt
from ..stats.breakdown import compare_buckets
from ..stats.comparisons import Plan
from ..stats.equivalence import DEFAULT_LOSS_MARGIN
from ..stats.grouping import shown_context
from .render import Table

PREFIX = "loss_breakdown_"
TITLES = {"target_frequency": "by the target token's training frequency",
          "input_id_weight": "by the input token's binary16 code weight (every arm on the same tokens)",
          "input_code_weight": "by the input token's weight under the arm's own fixed code",
          "position": "by position in the context window"}


def title(name: str) -> str:
    return TITLES.get(name, f"by {name}")


def breakdown_tables(study, plan: Plan, margin: float = DEFAULT_LOSS_MARGIN
                     ) -> tuple[dict[str, Table], pd.DataFrame, list[str]]:
    """{table name: Table} per breakdown, the comparison rows behind them, and notes."""
    rows, notes = compare_buckets(study, plan, margin)
    if rows.empty:
        return {}, rows, notes
    made = {f"{PREFIX}{name}": _table(study, name, part, margin)
            for name, part in rows.groupby("breakdown", sort=False)}
    return made, rows, notes


def _mean_cell(mean: float, sd: float, decimals: int) -> str:
    return numfmt.num(mean, decimals) + ("" if not math.isfinite(sd) else f" ± {numfmt.num(sd, decimals)}")


def _share(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:+.1f}%"


def _table(study, name: str, part: pd.DataFrame, margin: float) -> Table:
    context = [c for c in shown_context(study.jobs) if c in part]
    dm = numfmt.decimals_for(list(part["sd_a"]) + list(part["sd_b"]), list(part["mean_a"]))
    dd = numfmt.decimals_for(list(part["se"]), list(part["delta"].abs()))
    columns = [*context, "comparison (a − b)", "bucket", "tokens (share)", "mean loss a", "mean loss b", "test",
               "Δ nats/token", "95% CI", "Holm p", "TOST Holm p", "verdict", "share of gap"]
    cells = []
    for r in part.itertuples(index=False):
        ci = "n/a" if not math.isfinite(r.ci_low) else f"[{numfmt.num(r.ci_low, dd)}, {numfmt.num(r.ci_high, dd)}]"
        delta = "n/a" if not math.isfinite(r.delta) else f"{r.delta:+.{dd}f}"
        cells.append([*(str(getattr(r, c)) for c in context), r.comparison, r.label,
                      f"{numfmt.integer(r.tokens)} ({r.token_share:.1%})", _mean_cell(r.mean_a, r.sd_a, dm),
                      _mean_cell(r.mean_b, r.sd_b, dm), f"{r.test_label}, {r.n}", delta, ci,
                      numfmt.p_value(r.p_holm), numfmt.p_value(r.tost_p_holm), r.verdict, _share(r.gap_share)])
    wholes = part.drop_duplicates("comparison")
    whole = "; ".join(f"{r.comparison} {r.whole_gap:+.{dd}f}" for r in wholes.itertuples(index=False))
    definition = ""
    if "definition" in study.breakdown and len(study.breakdown):
        defs = study.breakdown.loc[study.breakdown["breakdown"] == name, "definition"]
        definition = f" ({defs.iloc[0]})" if len(defs) and defs.iloc[0] else ""
    caption = (f"Final validation loss (nats/token) {title(name)}{definition}. Per bucket: its validation tokens, "
               "each arm's mean loss over seeds (± sd), and the gap a − b with the headline's test (paired over "
               "seeds with common random numbers, else Welch), its 95% CI, "
               f"Holm-adjusted p across the {part['bucket'].nunique()} bucket rows of each comparison, TOST against "
               f"±{margin} nats/token (Holm-adjusted the same way) and the verdict. Share of gap = gap × bucket "
               f"tokens / all tokens, over the whole gap (the val-loss gap: {whole}); the shares of a comparison add "
               "up to 100%.")
    numeric = (set(range(len(context) + 2, len(columns) - 2)) - {len(context) + 5}) | {len(columns) - 1}
    return Table(f"{PREFIX}{name}", caption, columns, cells, part.reset_index(drop=True), numeric=numeric)
