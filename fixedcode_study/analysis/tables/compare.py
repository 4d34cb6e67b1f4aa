"""The comparisons table: arm a minus arm b per metric, with test, CIs, effect sizes, Holm, TOST, verdict."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import numfmt
from ..stats.comparisons import DEFAULT_BASELINE, Plan, compare, resolve
from ..stats.equivalence import ALPHA, INCONCLUSIVE, PRIMARY, Margins
from ..errors import AnalysisError
from ..stats.grouping import (
    COMPARED_FINAL,
    comparison_points,
    context_columns,
    metric_order,
    metric_title,
    model_rank,
    shown_context,
)
from ..stats.metrics import percent_change
from .render import Table


def _sort(diffs: pd.DataFrame, study) -> pd.DataFrame:
    """Context (data, then model size) as the tables; then plan order and metric order (already in rows)."""
    rank = model_rank(study.jobs)
    keys = [c for c in ("data",) if c in diffs] + ["_model_rank"]
    return (diffs.assign(_model_rank=diffs["model"].map(rank))
            .sort_values(keys, kind="stable").drop(columns="_model_rank"))


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


def compute(study, plan: Plan, margins: Margins, finals: list[str] = COMPARED_FINAL,
            alpha: float = ALPHA, strict_primary: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The comparison rows for a study and notes on requested names that matched nothing. A declared
    primary comparison naming an arm that did not run is a note (a study file may list arms a partial
    run lacks); with `strict_primary` (--primary on the command) it is an error, as --pairs is."""
    points = comparison_points(study, finals)
    context = context_columns(study.jobs)
    metrics = metric_order(points, finals)
    notes = []
    variants = study.included_jobs
    known = set(variants["variant"]) | set(variants["input"])
    if plan.baseline not in known and plan.baseline != DEFAULT_BASELINE and len(variants):
        raise AnalysisError(f"--baseline {plan.baseline!r}: no included variant or input of that name; "
                            f"known: {', '.join(sorted(map(str, known)))}")
    for a, b in plan.pairs:
        missing = [n for n in (a, b) if n not in known]
        if missing:
            raise AnalysisError(f"--pairs {a}:{b}: no included variant or input named {', '.join(map(repr, missing))}; "
                                f"known: {', '.join(sorted(map(str, known)))}")
    for a, b in plan.primary or ():
        missing = [n for n in (a, b) if resolve(n, variants) is None]
        if missing and strict_primary:
            raise AnalysisError(f"--primary {a}:{b}: no included variant or input named "
                                f"{', '.join(map(repr, missing))}; known: {', '.join(sorted(map(str, known)))}")
        if missing:
            notes.append(f"declared primary comparison {a} − {b} not made: no included variant or input named "
                         f"{', '.join(map(repr, missing))}")
    unused = margins.unused(set(metrics))
    if unused:
        notes.append(f"--margin given for metrics that are not compared here: {', '.join(unused)} "
                     f"(compared: {', '.join(metrics)})")
    diffs = compare(points, context, plan, metrics, margins, alpha=alpha)
    if not diffs.empty:
        diffs = _sort(diffs, study)
    return diffs, notes


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
