"""Which arms are compared with which, and the table of comparisons with Holm-adjusted verdicts.

Per comparison context (model, and data when several), the default comparisons are:
1. every variant minus the baseline (``baseline=``, default learned);
2. the two fixed codes directly: every gf2 variant minus binary16, whenever both are present;
3. any pairs asked for with ``pairs=a:b`` (a minus b).
4. the study's declared primary comparisons (``Plan.primary``, read/declared.py), in their declared
   orientation, also where the plan already compares the two arms the other way round.
A pair already in the list (in either order) is not repeated. Names match a variant label
exactly ("gf2 (code_width=24)") or an input name ("gf2": its plain variant, else its first).

Families: a row is *primary* when its pair is a declared primary comparison (in its context) and
its metric is the primary metric (the first tested, val bpb), or when its pair is declared on the
composition measures (``Plan.measure_pairs``, a study file's ``measures:``) and its metric is one of
``Plan.measures`` (the measures of each arm's pairs of models, read/compose.py: a study's compose
records enter the same table as one point per pair, ``comparison_rows(..., extra=...)``); every other
row is *exploratory*.
Holm-Bonferroni runs within each family, for the tests of difference and separately for the TOST
p-values (equivalence.family_verdicts), so a primary verdict depends only on the declared family:
the same comparison on the same jobs gets the same verdict whatever else a report compares. Only
primary rows get verdicts. ``Plan.primary = None`` (a library call that declares nothing) makes
every row one primary family, as one table used to be. Each inconclusive primary row also gets
the seed pairs that would give 80% power at its observed Δ and sd (power.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import AnalysisError

from .equivalence import ALPHA, EXPLORATORY, PRIMARY, Margins, family_verdicts, tost_p
from .metrics import on_log_scale, to_scale
from .pairing import compare_arms, n_label, test_label
from .power import seeds_columns
from .core import CONFIDENCE
from .grouping import COMPARED_FINAL, comparison_points, context_columns, metric_order, model_rank

DEFAULT_BASELINE = "learned"
FIXED_PAIR = ("gf2", "binary16")  # compared directly by default: gf2 minus binary16
VS_BASELINE, FIXED_CODES, REQUESTED, DECLARED = "vs baseline", "fixed codes", "requested", "declared"


@dataclass(frozen=True)
class Plan:
    """What to compare: a baseline name, whether to add the fixed-code pair, explicit pairs, and the
    declared primary comparisons (None: every row is primary; (): none is), on the primary metric and,
    for `measure_pairs`, on each of `measures`."""
    baseline: str = DEFAULT_BASELINE
    pairs: tuple[tuple[str, str], ...] = ()
    fixed_pair: bool = True
    primary: tuple[tuple[str, str], ...] | None = None
    measure_pairs: tuple[tuple[str, str], ...] = ()
    measures: tuple[str, ...] = ()


def parse_pairs(texts: list[str] | None, flag: str = "pairs=") -> tuple[tuple[str, str], ...]:
    """['a:b,c:d', 'e:f'] -> (('a','b'), ('c','d'), ('e','f'))."""
    pairs = []
    for text in texts or []:
        for item in filter(None, (s.strip() for s in text.split(","))):
            a, sep, b = item.partition(":")
            if not sep or not a.strip() or not b.strip() or a.strip() == b.strip():
                raise AnalysisError(f"{flag.rstrip('=')}: expects A:B[,C:D] with two different names, got {item!r}")
            pairs.append((a.strip(), b.strip()))
    return tuple(pairs)


LABEL = re.compile(r"^(?P<input>[^\s(]+) \((?P<props>.*)\)$")   # 'gf2 (code_width=24, lr=0.001)'


def label_parts(label: str) -> tuple[str, dict[str, str]]:
    """'gf2 (code_width=24, lr=0.001)' -> ('gf2', {'code_width': '24', 'lr': '0.001'})."""
    match = LABEL.match(str(label))
    if not match:
        return str(label), {}
    parts = (p.partition("=") for p in match["props"].split(", "))
    return match["input"], {k.strip(): v.strip() for k, sep, v in parts if sep}


def resolve(name: str, variants: pd.DataFrame) -> str | None:
    """A variant label for ``name`` among ``variants`` (columns variant, input, variant_order): the
    exact label; else an input name's plain variant (its first); else a label with some of its
    settings, 'binary16 (values=pm1, scale_mode=match_init)', when exactly one variant of that input
    has them all (a study file can name an arm without the settings that do not tell it apart)."""
    if (variants["variant"] == name).any():
        return name
    same_input = variants[variants["input"] == name].sort_values("variant_order", kind="stable")
    if not same_input.empty:
        return str(same_input["variant"].iloc[0])
    base, wanted = label_parts(name)
    if not wanted:
        return None
    matches = [v for v in dict.fromkeys(variants.loc[variants["input"] == base, "variant"])
               if wanted.items() <= label_parts(v)[1].items()]
    return str(matches[0]) if len(matches) == 1 else None


def primary_pairs(variants: pd.DataFrame, plan: Plan, declared: tuple[tuple[str, str], ...] | None = None
                  ) -> list[tuple[str, str]]:
    """The declared primary comparisons (on the primary metric, or the given ones) that resolve in one
    context, as (a, b) variant labels."""
    out = []
    for a, b in (plan.primary or ()) if declared is None else declared:
        pair = (resolve(a, variants), resolve(b, variants))
        if None not in pair and pair[0] != pair[1] and pair not in out:
            out.append(pair)
    return out


def arm_pairs(variants: pd.DataFrame, plan: Plan) -> list[tuple[str, str, str]]:
    """(a, b, kind) in display order for one context; a declared pair keeps its declared orientation."""
    variants = variants.drop_duplicates("variant").sort_values("variant_order", kind="stable")
    declared = primary_pairs(variants, plan)
    declared += [p for p in primary_pairs(variants, plan, plan.measure_pairs) if p not in declared]
    out: list[tuple[str, str, str]] = []
    seen: set[frozenset] = set()

    def add(a: str | None, b: str | None, kind: str) -> None:
        if a is None or b is None or a == b or frozenset((a, b)) in seen:
            return
        if (b, a) in declared:
            a, b = b, a
        seen.add(frozenset((a, b)))
        out.append((a, b, kind))

    base = resolve(plan.baseline, variants)
    if base is not None:
        for v in variants["variant"]:
            add(v, base, VS_BASELINE)
    if plan.fixed_pair:
        ref = resolve(FIXED_PAIR[1], variants)
        for v in variants.loc[variants["input"] == FIXED_PAIR[0], "variant"]:
            add(v, ref, FIXED_CODES)
    for a, b in plan.pairs:
        add(resolve(a, variants), resolve(b, variants), REQUESTED)
    for a, b in declared:
        add(a, b, DECLARED)
    return out


def family_of(plan: Plan, declared: list[tuple[str, str]], a: str, b: str, metric: str, primary_metric: str,
              on_measures: list[tuple[str, str]] = ()) -> str:
    if plan.primary is None:
        return PRIMARY
    if (a, b) in on_measures and metric in plan.measures:
        return PRIMARY
    return PRIMARY if (a, b) in declared and metric == primary_metric else EXPLORATORY


def _arm(group: pd.DataFrame, variant: str, metric: str) -> pd.DataFrame:
    rows = group[(group["variant"] == variant) & (group["metric"] == metric)]
    rows = rows.assign(value=to_scale(rows["value"], metric))
    return rows[np.isfinite(rows["value"])]


def compare(points: pd.DataFrame, context: list[str], plan: Plan, metrics: list[str],
            margins: Margins | None = None, confidence: float = CONFIDENCE, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per (context, pair, metric) with test, CI, effect size, Holm p's, TOST and verdict.

    ``points`` has one row per run and metric: context columns, variant, variant_order, input,
    metric, value, run, seed, crn. Values are tested on the metric's scale (log for perplexities).
    """
    margins = margins or Margins()
    rows, comparisons = [], []
    primary_metric = metrics[0] if metrics else None
    for ctx, group in points.groupby(context, sort=False, dropna=False):
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        variants = group[["variant", "input", "variant_order"]]
        declared = primary_pairs(variants.drop_duplicates("variant"), plan)
        on_measures = primary_pairs(variants.drop_duplicates("variant"), plan, plan.measure_pairs)
        for a, b, kind in arm_pairs(variants, plan):
            for metric in metrics:
                arm_a, arm_b = _arm(group, a, metric), _arm(group, b, metric)
                if arm_a.empty or arm_b.empty:
                    continue
                cmp, why = compare_arms(arm_a, arm_b, confidence)
                margin = margins.for_metric(metric)
                raw = group[group["metric"] == metric]
                rows.append(dict(zip(context, ctx, strict=True)) | {
                    "comparison": f"{a} − {b}", "variant_a": a, "variant_b": b, "kind": kind, "metric": metric,
                    "family": family_of(plan, declared, a, b, metric, primary_metric, on_measures),
                    "scale": "log" if on_log_scale(metric) else "linear",
                    "test": cmp.test, "test_label": test_label(cmp, why), "n": n_label(cmp),
                    "n_a": cmp.n_a, "n_b": cmp.n_b, "n_pairs": cmp.n_pairs,
                    "mean_a": float(raw.loc[raw["variant"] == a, "value"].mean()),
                    "mean_b": float(raw.loc[raw["variant"] == b, "value"].mean()),
                    "delta": cmp.delta, "ci_low": cmp.ci_low, "ci_high": cmp.ci_high, "se": cmp.se,
                    "dof": cmp.dof, "p_value": cmp.p_value, "effect_name": cmp.effect_name,
                    "effect": cmp.effect, "effect_low": cmp.effect_low, "effect_high": cmp.effect_high,
                    "margin": margin.on_scale if margin else math.nan,
                    "margin_label": margin.label() if margin else "none",
                    "margin_source": margin.source if margin else "",
                    "tost_p": tost_p(cmp, margin.on_scale if margin else None),
                    "runs_a": ";".join(sorted(arm_a["run"])), "runs_b": ";".join(sorted(arm_b["run"])),
                })
                comparisons.append(cmp)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    family_verdicts(table, comparisons, alpha)
    # Seed pairs for 80% power at the observed Δ and sd, at α/m of the primary Holm families (power.py)
    return pd.concat([table, seeds_columns(table, alpha)], axis=1)


def _sort(diffs: pd.DataFrame, study) -> pd.DataFrame:
    """Context (data, then model size) as the tables; then plan order and metric order (already in rows)."""
    rank = model_rank(study.jobs)
    keys = [c for c in ("data",) if c in diffs] + ["_model_rank"]
    return (diffs.assign(_model_rank=diffs["model"].map(rank))
            .sort_values(keys, kind="stable").drop(columns="_model_rank"))


def comparison_rows(study, plan: Plan, margins: Margins, finals: list[str] = COMPARED_FINAL,
                    alpha: float = ALPHA, strict_primary: bool = False,
                    extra: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The comparison rows for a study and notes on requested names that matched nothing. A declared
    primary comparison naming an arm that did not run is a note (a study file may list arms a partial
    run lacks); with `strict_primary` (primary= on the command) it is an error, as pairs= is. `extra`:
    more points to compare, one per unit (the composition measures: one per pair of models, with the
    pair's seeds as its `seed`), in one table and one Holm procedure per family with the jobs' own."""
    points = comparison_points(study, finals)
    context = context_columns(study.jobs)
    metrics = metric_order(points, finals)
    if extra is not None and len(extra):
        points = pd.concat([points, extra], ignore_index=True)
        metrics += [m for m in dict.fromkeys(extra["metric"]) if m not in metrics]
    notes = []
    variants = study.included_jobs
    known = set(variants["variant"]) | set(variants["input"])
    if plan.baseline not in known and plan.baseline != DEFAULT_BASELINE and len(variants):
        raise AnalysisError(f"baseline={plan.baseline}: no included variant or input of that name; "
                            f"known: {', '.join(sorted(map(str, known)))}")
    for a, b in plan.pairs:
        missing = [n for n in (a, b) if n not in known]
        if missing:
            raise AnalysisError(f"pairs={a}:{b}: no included variant or input named {', '.join(map(repr, missing))}; "
                                f"known: {', '.join(sorted(map(str, known)))}")
    for a, b in (*(plan.primary or ()), *(p for p in plan.measure_pairs if p not in (plan.primary or ()))):
        missing = [n for n in (a, b) if resolve(n, variants) is None]
        if missing and strict_primary:
            raise AnalysisError(f"primary={a}:{b}: no included variant or input named "
                                f"{', '.join(map(repr, missing))}; known: {', '.join(sorted(map(str, known)))}")
        if missing:
            notes.append(f"declared primary comparison {a} − {b} not made: no included variant or input named "
                         f"{', '.join(map(repr, missing))}")
    unused = margins.unused(set(metrics))
    if unused:
        notes.append(f"margin= given for metrics that are not compared here: {', '.join(unused)} "
                     f"(compared: {', '.join(metrics)})")
    diffs = compare(points, context, plan, metrics, margins, alpha=alpha)
    if not diffs.empty:
        diffs = _sort(diffs, study)
    return diffs, notes
