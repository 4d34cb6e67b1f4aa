"""Where the gap lives: the loss breakdown's bucket comparisons and own-code profiles (stats/breakdown.py),
as one heat map (or profile figure) per breakdown, a summary table, and every bucket in CSV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..figures import curves as figures
from ..figures.breakdown import breakdown_heatmap, profile_figure
from ..stats.breakdown import METHOD
from ..stats.equivalence import ALPHA
from ..stats.grouping import context_columns, shown_context
from ..tables.breakdown import PREFIX, PROFILE_PREFIX, TITLES as BREAKDOWNS, breakdown_tables, table_name, title
from ..tables.render import Table
from .base import Part, embed, figure_ref, inline_table

TITLE = "Where the gap lives (loss breakdown)"
TABLES = ("loss_breakdown",) + tuple(prefix + name for name in BREAKDOWNS for prefix in (PREFIX, PROFILE_PREFIX))
FIGURES = TABLES   # the old single figure was loss_breakdown; one figure per table now


def summary_table(rows: pd.DataFrame, context: list[str]) -> Table:
    """Per compared breakdown: comparisons, buckets, how many were tested and how many have BH q < α,
    and the largest difference between the buckets' weighted sum and the runs' own total gap."""
    data = []
    for name, part in rows.groupby("breakdown", sort=False):
        wholes = part.drop_duplicates(["comparison", *context])
        data.append({"breakdown": name, "comparisons": len(wholes), "buckets": len(part),
                     "tested": int(part["tested"].sum()), "q_below_alpha": int((part["q_value"] < ALPHA).sum()),
                     "max_sum_error": float(np.nanmax(np.abs(wholes["whole_gap"] - wholes["total_gap"])))})
    data = pd.DataFrame(data)
    cells = [[title(r.breakdown), str(r.comparisons), str(r.buckets), str(r.tested), str(r.q_below_alpha),
              f"{r.max_sum_error:.1e}", f"[`{table_name(r.breakdown)}.csv`](tables/{table_name(r.breakdown)}.csv)"]
             for r in data.itertuples(index=False)]
    return Table("loss_breakdown", "The compared breakdowns: per breakdown, the comparison rows (context × "
                 f"comparison), their buckets, how many held enough tokens to be tested, how many of those have BH q < "
                 f"{ALPHA} (exploratory), and the largest |Σ_b Δ_b tokens_b / T − the runs' own gap in total val loss| "
                 "over its comparison rows (the buckets add up to the gap).",
                 ["breakdown", "comparison rows", "buckets", "tested", f"q < {ALPHA}", "max |Σ − gap|", "every bucket"],
                 cells, data, numeric={1, 2, 3, 4, 5})


def build(results, figures_dir: Path) -> Part:
    rows, profiles = results.buckets, results.profiles
    if rows.empty and profiles.empty:
        return Part()
    study = results.compared
    context = shown_context(study.jobs)
    part = Part(tables=breakdown_tables(study, rows, profiles, results.options.loss_margin,
                                        results.options.min_bucket_tokens))
    tested = int(rows["tested"].sum()) if not rows.empty else 0
    lines = [f"## {TITLE}", "",
             "At its final validation every job adds up its loss (nats), tokens and bytes per bucket of each breakdown "
             "(results.json `val_breakdown`): the target token's count in the training split (log2 buckets, 0 = never "
             "seen), the input token's binary16 code weight (popcount of its id: every arm on the same tokens), its "
             "weight under the arm's own fixed code, and the position in the window (log2 buckets). Where every run "
             "of two arms holds the same tokens in each bucket, each bucket's mean loss is compared like the headline, "
             f"in buckets of at least {results.options.min_bucket_tokens:,g} tokens (smaller ones show their Δ, "
             f"untested); one procedure, Benjamini–Hochberg ({METHOD}), controls the false discovery rate over all "
             f"{tested} tested buckets of this report. Every bucket is exploratory: none is a finding. The weight "
             "under the arm's own code puts other tokens in a bucket for each code, so it is a per-arm profile: no "
             "gap, test or share.", ""]
    if not rows.empty:
        table = summary_table(rows, context_columns(study.jobs))
        part.tables["loss_breakdown"] = table
        lines += [table.caption, "", *inline_table(table), ""]
        figures_made = [part.add(breakdown_heatmap(rows, name, context, figures_dir))
                        for name in dict.fromkeys(rows["breakdown"])]
        lines += [line for figure in figures_made for line in embed(figure)]
    if not profiles.empty:
        styles = figures.variant_styles(study)
        for name in dict.fromkeys(profiles["breakdown"]):
            figure = part.add(profile_figure(profiles, name, context, styles, figures_dir))
            lines += [f"### {title(name)}", "",
                      f"Each arm's own profile, {figure_ref(figure.stem) if figure else 'no figure'}; every bucket in "
                      f"[`{table_name(name)}.csv`](tables/{table_name(name)}.csv).", "", *embed(figure)]
    part.lines = lines
    return part
