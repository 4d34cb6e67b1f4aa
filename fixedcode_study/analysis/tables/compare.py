"""The comparisons table: arm a minus arm b per metric, with test, CIs, effect sizes, Holm, TOST, verdict."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import numfmt
from ..stats.equivalence import ALPHA, INCONCLUSIVE, PRIMARY
from ..stats.grouping import metric_title, shown_context
from ..stats.metrics import percent_change
from .render import Table


def delta_cells(row, decimals: int) -> tuple[str, str]:
    if row.scale == "log":  # a difference of logs, shown as the % change of the geometric mean
        pct = [percent_change(v) if math.isfinite(v) else math.nan for v in (row.delta, row.ci_low, row.ci_high)]
        width = abs(pct[2] - pct[1]) if all(map(math.isfinite, pct)) else math.nan
        dd = numfmt.decimals_for([width / 4 if math.isfinite(width) else math.nan], [abs(pct[0])])
        dd = min(dd, 3)
        ci = "n/a" if math.isnan(pct[1]) else f"[{pct[1]:+.{dd}f}%, {pct[2]:+.{dd}f}%]"
        return f"{pct[0]:+.{dd}f}%", ci
    ci = "n/a" if math.isnan(row.ci_low) else f"[{numfmt.num(row.ci_low, decimals)}, {numfmt.num(row.ci_high, decimals)}]"
    return f"{row.delta:+.{decimals}f}", ci


def _effect_cell(row) -> str:
    if not row.effect_name or not math.isfinite(row.effect):
        return "n/a"
    ci = ("" if not (math.isfinite(row.effect_low) and math.isfinite(row.effect_high))
          else f" [{row.effect_low:.2f}, {row.effect_high:.2f}]")
    return f"{row.effect_name} = {row.effect:.2f}{ci}"


def _count(value, note) -> str:
    """A seeds-needed number, or '—' with the reason it is not reachable or not given (power.py)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = math.nan
    if math.isfinite(value):
        return f"{round(value):,}"
    note = note if isinstance(note, str) and note else ""
    return f"— ({note})" if note else "—"


def seeds_cells(row) -> tuple[str, str]:
    """(difference, equivalence): seed pairs for 80% power at the observed Δ and sd, Holm-safe α/m."""
    return (_count(row.seeds_for_difference, row.seeds_for_difference_note),
            _count(row.seeds_for_equivalence, row.seeds_for_equivalence_note))


def seeds_cell(row) -> str:
    """The table cell: filled for inconclusive rows only, the rows more seeds would settle."""
    if row.verdict != INCONCLUSIVE:
        return ""
    diff, equiv = seeds_cells(row)
    return diff if diff == equiv else f"{diff} / {equiv}"


def comparison_table(study, diffs: pd.DataFrame, decimals: dict[str, int], name: str = "comparisons",
                     lead: str = "") -> Table:
    shown = shown_context(study.jobs)
    columns = shown + ["comparison (a − b)", "metric", "test", "n", "Δ", "95% CI of Δ", "effect [95% CI]",
                       "p", "Holm p", "margin", "TOST Holm p", "verdict",
                       "seeds for 80% power (Δ ≠ 0 / equivalence)"]
    rows = []
    for d in diffs.itertuples(index=False):
        dd = decimals.get(d.metric, 3)
        delta, ci = delta_cells(d, dd)
        rows.append([str(getattr(d, c)) for c in shown] + [
            d.comparison, metric_title(d.metric), d.test_label, d.n, delta, ci, _effect_cell(d),
            numfmt.p_value(d.p_value), numfmt.p_value(d.p_holm), d.margin_label, numfmt.p_value(d.tost_p_holm),
            d.verdict, seeds_cell(d)])
    primary = (diffs["family"] == PRIMARY) if "family" in diffs else pd.Series(True, index=diffs.index)
    n_tests = int(np.isfinite(diffs.loc[primary, "p_value"]).sum()) if not diffs.empty else 0
    n_tost = int(np.isfinite(diffs.loc[primary, "tost_p"]).sum()) if not diffs.empty else 0
    n_other = int(np.isfinite(diffs.loc[~primary, "p_value"]).sum()) if not diffs.empty else 0
    caption = (lead + "Each row is arm a minus arm b on one metric. Test: paired t over seed pairs when the runs "
               "record common random numbers (CRN: results.json init.scheme = per_group_generators) and ≥ 2 pairs "
               "exist, else Welch's t (why in brackets: no CRN record, or < 2 seed pairs); "
               "n: seed pairs, or runs per arm. Δ: mean difference (perplexities: % change of the geometric "
               "mean); its 95% CI comes from the same test. Effect: d_z (paired) or Hedges' g, 95% CI from the "
               f"noncentral t. Holm p: adjusted within the row's family, the {n_tests} primary tests of Δ = 0 (the "
               f"comparisons the study declares) or the {n_other} exploratory ones; TOST Holm p: equivalence within "
               f"±margin, adjusted the same way ({n_tost} primary rows with a margin). Verdict (primary rows only) at "
               f"α = {ALPHA} on the Holm p's: better/worse (Δ ≠ 0, not within the margin), equivalent (within "
               "the margin), inconclusive (neither); an exploratory row has no verdict, whatever its p; see "
               "Methods. Seeds for 80% power (inconclusive primary rows only): "
               "the number of seed pairs a paired study would need for 80% power to show Δ ≠ 0, and to show "
               "equivalence within the margin by TOST, if the observed Δ and sd of the paired differences were "
               "the truth, each at α/m of the primary family (enough for Holm whatever the other rows do); "
               "— when no number of seeds can (Δ = 0; Δ outside the margin) or the row is not paired.")
    numeric = (set(range(len(shown) + 3, len(shown) + 11)) - {len(shown) + 9}) | {len(shown) + 12}
    data = diffs.drop(columns=[c for c in ("variant_order",) if c in diffs])
    return Table(name, caption, columns, rows, data, set(), numeric)
