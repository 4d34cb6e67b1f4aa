"""The loss breakdown tables: per bucket, each arm's mean loss, the gap with its (exploratory) test,
and its share of the whole gap; and, for the arm's own code, a per-arm profile.

One table per common-partition breakdown (target frequency, input token's binary16 weight, position
in the window), rows = (context, comparison, bucket), and one profile table per own-code breakdown,
rows = (context, arm, bucket); the numbers come from stats/breakdown.py.
"""

from __future__ import annotations

import math

import pandas as pd

from . import numfmt
from ..stats.breakdown import MIN_TOKENS, PROFILES
from ..stats.grouping import shown_context
from .render import Table

PREFIX = "loss_breakdown_"
PROFILE_PREFIX = "loss_profile_"
TITLES = {"target_frequency": "by the target token's training frequency",
          "input_id_weight": "by the input token's binary16 code weight (every arm on the same tokens)",
          "input_code_weight": "by the input token's weight under the arm's own fixed code (a per-arm profile)",
          "position": "by position in the context window"}


def title(name: str) -> str:
    return TITLES.get(name, f"by {name}")


def table_name(name: str) -> str:
    return (PROFILE_PREFIX if name in PROFILES else PREFIX) + name


def breakdown_tables(study, rows: pd.DataFrame, profiles: pd.DataFrame, margin: float,
                     min_tokens: float = MIN_TOKENS) -> dict[str, Table]:
    """{table name: Table}: one per compared breakdown (rows) and one per own-code profile (profiles)."""
    made = {}
    if not rows.empty:
        tested = int(rows["tested"].sum())
        for name, part in rows.groupby("breakdown", sort=False):
            made[table_name(name)] = _table(study, name, part, margin, min_tokens, tested)
    if not profiles.empty:
        for name, part in profiles.groupby("breakdown", sort=False):
            made[table_name(name)] = _profile_table(study, name, part)
    return made


def _mean_cell(mean: float, sd: float, decimals: int) -> str:
    return numfmt.num(mean, decimals) + ("" if not math.isfinite(sd) else f" ± {numfmt.num(sd, decimals)}")


def _share(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:+.1f}%"


def _definition(study, name: str) -> str:
    if "definition" in study.breakdown and len(study.breakdown):
        defs = study.breakdown.loc[study.breakdown["breakdown"] == name, "definition"]
        return f" ({defs.iloc[0]})" if len(defs) and defs.iloc[0] else ""
    return ""


def _table(study, name: str, part: pd.DataFrame, margin: float, min_tokens: float, tested: int) -> Table:
    context = [c for c in shown_context(study.jobs) if c in part]
    dm = numfmt.decimals_for(list(part["sd_a"]) + list(part["sd_b"]), list(part["mean_a"]))
    dd = numfmt.decimals_for(list(part["se"]), list(part["delta"].abs()))
    columns = [*context, "comparison (a − b)", "bucket", "tokens (share)", "mean loss a", "mean loss b", "test",
               "Δ nats/token", "95% CI", "p", "BH q", "TOST BH q", "share of gap"]
    cells = []
    for r in part.itertuples(index=False):
        ci = "n/a" if not math.isfinite(r.ci_low) else f"[{numfmt.num(r.ci_low, dd)}, {numfmt.num(r.ci_high, dd)}]"
        delta = "n/a" if not math.isfinite(r.delta) else f"{r.delta:+.{dd}f}"
        cells.append([*(str(getattr(r, c)) for c in context), r.comparison, r.label,
                      f"{numfmt.integer(r.tokens)} ({r.token_share:.1%})", _mean_cell(r.mean_a, r.sd_a, dm),
                      _mean_cell(r.mean_b, r.sd_b, dm), r.test_label if not r.tested else f"{r.test_label}, {r.n}",
                      delta, ci, numfmt.p_value(r.p_value), numfmt.p_value(r.q_value), numfmt.p_value(r.tost_q),
                      _share(r.gap_share)])
    caption = (f"Final validation loss (nats/token) {title(name)}{_definition(study, name)}. Per bucket: its "
               "validation tokens (the same in every run), each arm's mean loss over seeds (± sd) and the gap a − b. "
               f"Buckets with at least {min_tokens:,g} tokens are tested with the headline's test (paired over seeds "
               "with common random numbers, else Welch; 95% CI, p) and by TOST against "
               f"±{margin} nats/token; BH q: Benjamini–Hochberg over all {tested} tested buckets of this report "
               "(difference and TOST separately). Smaller buckets show their Δ only. Exploratory: no bucket is a "
               "finding. Share of gap = Δ × bucket tokens / all tokens, over the whole gap of its context and "
               "comparison (columns whole_gap and total_gap of the CSV: the two agree, and the shares add up to 100%).")
    numeric = (set(range(len(context) + 2, len(columns))) - {len(context) + 5})
    return Table(table_name(name), caption, columns, cells, part.reset_index(drop=True), numeric=numeric)


def _profile_table(study, name: str, part: pd.DataFrame) -> Table:
    context = [c for c in shown_context(study.jobs) if c in part]
    dm = numfmt.decimals_for(list(part["sd"]), list(part["mean"]))
    columns = [*context, "arm", "bucket", "tokens (share)", "mean loss", "n"]
    cells = [[*(str(getattr(r, c)) for c in context), r.variant, r.label,
              f"{numfmt.integer(r.tokens)} ({r.token_share:.1%})", _mean_cell(r.mean, r.sd, dm), str(r.n)]
             for r in part.itertuples(index=False)]
    caption = (f"Final validation loss (nats/token) {title(name)}{_definition(study, name)}: each arm's own "
               "tokens per bucket of its own code and its mean loss over seeds (± sd). Two codes put different "
               "tokens in a bucket, so no gap, test or share is formed: a profile of each arm, not a part of any gap.")
    return Table(table_name(name), caption, columns, cells, part.reset_index(drop=True),
                 numeric=set(range(len(context) + 2, len(columns))))
