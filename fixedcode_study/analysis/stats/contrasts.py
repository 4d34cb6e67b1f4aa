"""Seed-level contrasts the readings need beyond arm-vs-arm rows: a gap at one model size against
another, probe measures of arms at equal input RMS, one gap against another, a gap at a named point
of training and its change between two points.

Every function takes tidy per-seed values and returns `rows.Tested` rows, each tested on its own;
a reading that rests on several puts them in one family with `rows.in_family(rows, "what it holds")`.

**Which test.** Runs that share a seed under common random numbers (the same body initialisation
and data order: same body shapes, `init.scheme = per_group_generators`) are paired by seed; others
are independent, compared by Welch's t (core.py). Across model sizes the runs of one seed share the
data order but not the initialisation (the body's shapes differ), so per-seed gaps at two sizes are
not paired by the CRN design: `size_contrasts` uses Welch unless `paired=True` is asked for.
Within one size and budget, arms at one seed are paired (CRN), so a difference of two gaps
(`gap_difference`) and a gap's change between two points of training (`gap_change`, the same runs
at two points) are paired t tests over seeds; `paired=False` gives the Welch-Satterthwaite form
of the same linear contrast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from .core import CONFIDENCE, paired_compare, welch_compare
from .rows import Tested, from_comparison, from_se, t_row

MIN_PAIRS = 2


def _need(frame: pd.DataFrame, columns, where: str) -> None:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise AnalysisError(f"{where}: the frame lacks column(s) {sorted(missing)}; give one row per seed with "
                            f"{', '.join(columns)}")


def _two_arms(a: pd.Series, b: pd.Series, paired: bool, confidence: float):
    """a and b indexed by seed: paired over shared seeds when asked and >= 2 exist, else Welch."""
    if paired:
        shared = a.index.intersection(b.index)
        if len(shared) >= MIN_PAIRS:
            return paired_compare(a.loc[shared], b.loc[shared], confidence), "paired t over seeds"
    return welch_compare(a.to_numpy(), b.to_numpy(), confidence), (
        "Welch t over per-seed values" + (" (fewer than 2 shared seeds)" if paired else ""))


def _by_seed(frame: pd.DataFrame, where: str) -> pd.Series:
    if frame["seed"].duplicated().any():
        raise AnalysisError(f"{where}: a seed appears twice; give one value per seed")
    return frame.set_index("seed")["value"].astype(float).dropna()


# ------------------------------------------------------------------------------------ across model sizes


def size_contrasts(gaps: pd.DataFrame, pairs=None, paired: bool = False, arm: str = "",
                   confidence: float = CONFIDENCE) -> tuple[Tested, ...]:
    """The per-seed paired gap at size a minus at size b, at every budget both have.

    gaps: columns size, budget, seed, gap (and n, a size's parameter count, to order sizes; else by
    label). pairs: (a, b) size labels; default every pair, larger minus smaller. Welch unless paired.
    """
    _need(gaps, ("size", "budget", "seed", "gap"), "size_contrasts")
    order = (gaps.groupby("size")["n"].first().sort_values(kind="stable").index.tolist() if "n" in gaps
             else sorted(gaps["size"].unique()))
    pairs = list(pairs) if pairs is not None else [(b, a) for a, b in combinations(order, 2)]
    for a, b in pairs:
        if a not in order or b not in order:
            raise AnalysisError(f"size_contrasts: size {a if a not in order else b!r} is not in the gaps "
                                f"(sizes: {', '.join(map(str, order))})")
    rows = []
    for budget, part in gaps.groupby("budget", sort=True):
        for a, b in pairs:
            ga, gb = part[part["size"] == a], part[part["size"] == b]
            if ga.empty or gb.empty:
                continue
            where = f"size_contrasts ({budget}, {a} and {b})"
            cmp, how = _two_arms(_by_seed(ga.rename(columns={"gap": "value"}), where),
                                 _by_seed(gb.rename(columns={"gap": "value"}), where), paired, confidence)
            rows.append(from_comparison(
                "gap at size a minus gap at size b", cmp, f"{how}; the gap is paired by seed within each size",
                confidence, (("arm", arm), ("budget", budget), ("size_a", a), ("size_b", b))))
    return tuple(rows)


# ------------------------------------------------------------------------------------ probes at equal input RMS


def equal_rms_pairs(rms: pd.Series, rtol: float) -> list[tuple[str, str]]:
    """Pairs of arms (index of `rms`, in its order) whose input RMS agree within rtol."""
    arms = list(rms.index)
    return [(a, b) for a, b in combinations(arms, 2)
            if abs(rms[a] - rms[b]) <= rtol * max(abs(rms[a]), abs(rms[b]))]


def probe_contrasts(values: pd.DataFrame, pairs=None, by=("measure", "layer"), rtol: float = 0.05,
                    paired: bool = False, confidence: float = CONFIDENCE) -> tuple[Tested, ...]:
    """Arms compared on a probe measure only where their input RMS agree (within rtol, relative).

    values: one row per run and probed quantity, columns variant, seed, value, input_rms, and the `by`
    columns (e.g. measure, layer). pairs: (a, b) variants; default every pair at equal RMS, in the
    order variants first appear. A given pair at different RMS is an error: it would mix scale and
    interface. Welch over per-seed values unless paired (arms at one seed with CRN).
    """
    by = [c for c in by if c in values.columns]
    _need(values, ("variant", "seed", "value", "input_rms"), "probe_contrasts")
    rms = values.groupby("variant", sort=False)["input_rms"].agg(["first", "nunique"])
    if (rms["nunique"] > 1).any():
        raise AnalysisError("probe_contrasts: input_rms must be one value per variant "
                            f"({', '.join(rms.index[rms['nunique'] > 1])} has several)")
    rms = rms["first"].astype(float)
    if pairs is None:
        pairs = equal_rms_pairs(rms, rtol)
    else:
        pairs = list(pairs)
        for a, b in pairs:
            if a not in rms or b not in rms:
                raise AnalysisError(f"probe_contrasts: variant {a if a not in rms else b!r} has no probe values")
            if (a, b) not in equal_rms_pairs(rms.loc[[a, b]], rtol):
                raise AnalysisError(f"probe_contrasts: {a} (input RMS {rms[a]:.3g}) and {b} ({rms[b]:.3g}) differ by "
                                    f"more than rtol={rtol:g}; compare arms at equal input RMS")
    rows = []
    groups = values.groupby(by, sort=False) if by else [((), values)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for a, b in pairs:
            va, vb = part[part["variant"] == a], part[part["variant"] == b]
            if va.empty or vb.empty:
                continue
            where = f"probe_contrasts ({a} and {b})"
            cmp, how = _two_arms(_by_seed(va, where), _by_seed(vb, where), paired, confidence)
            rows.append(from_comparison("probe value of a minus b at equal input RMS", cmp, how, confidence,
                                        tuple(zip(by, key, strict=True)) + (("variant_a", a), ("variant_b", b),
                                                                            ("input_rms", float(rms[a])))))
    return tuple(rows)


# ------------------------------------------------------------------------------------ linear contrasts of arms


def linear_contrast(values: pd.DataFrame, weights: dict, name: str, paired: bool = True,
                    confidence: float = CONFIDENCE, context: tuple = ()) -> Tested:
    """sum_arm weight_arm x value_arm, per seed (paired: a t interval over the seeds every arm with a
    nonzero weight has) or from the arms' means (Welch-Satterthwaite: se^2 = sum w^2 s^2 / n).

    values: columns seed, variant, value (one row per run). Arms whose weights cancel drop out."""
    _need(values, ("seed", "variant", "value"), "linear_contrast")
    weights = {k: float(v) for k, v in weights.items() if v}
    groups = dict(tuple(values.groupby("variant", sort=False)))
    missing = [k for k in weights if k not in groups]
    if missing:
        raise AnalysisError(f"linear_contrast: no values for {', '.join(map(str, missing))} "
                            f"(variants: {', '.join(map(str, groups))})")
    arms = {k: _by_seed(groups[k], f"linear_contrast ({k})") for k in weights}
    if paired:
        shared = sorted(set.intersection(*(set(s.index) for s in arms.values())))
        if len(shared) >= MIN_PAIRS:
            per_seed = sum(w * arms[k].loc[shared].to_numpy() for k, w in weights.items())
            return t_row(name, per_seed, "paired by seed: the contrast per seed, t over seeds", confidence,
                         "seed pairs", context)
    estimate = sum(w * arms[k].mean() for k, w in weights.items())
    parts = [(w * w * arms[k].var(ddof=1) / len(arms[k]), len(arms[k])) for k, w in weights.items()]
    if any(n < 2 for _, n in parts):
        return Tested(name, float(estimate), math.nan, math.nan, math.nan, min(n for _, n in parts), math.nan,
                      "not tested (an arm has fewer than 2 runs)", context=context, confidence=confidence)
    var = sum(v for v, _ in parts)
    dof = var ** 2 / sum(v * v / (n - 1) for v, n in parts if v > 0) if var > 0 else math.nan
    how = "Welch-Satterthwaite over independent arms" + (" (fewer than 2 shared seeds)" if paired else "")
    return from_se(name, float(estimate), math.sqrt(var), dof, min(n for _, n in parts), how, confidence,
                   context=context)


@dataclass(frozen=True)
class GapDifference:
    first: Tested        # a - b
    second: Tested       # c - d
    difference: Tested   # (a - b) - (c - d)


def gap_difference(values: pd.DataFrame, first: tuple[str, str], second: tuple[str, str], paired: bool = True,
                   confidence: float = CONFIDENCE, context: tuple = ()) -> GapDifference:
    """Two gaps and their difference, e.g. the input side (binary16+untied - learned+untied) against the
    output side (learned+fixed - learned+untied): (a - b) - (c - d), paired by seed under CRN."""
    (a, b), (c, d) = first, second
    weights: dict = {}
    for arm, w in ((a, 1.0), (b, -1.0), (c, -1.0), (d, 1.0)):
        weights[arm] = weights.get(arm, 0.0) + w
    ctx = context + (("first", f"{a} − {b}"), ("second", f"{c} − {d}"))
    return GapDifference(
        linear_contrast(values, {a: 1.0, b: -1.0}, f"{a} − {b}", paired, confidence, ctx),
        linear_contrast(values, {c: 1.0, d: -1.0}, f"{c} − {d}", paired, confidence, ctx),
        linear_contrast(values, weights, f"({a} − {b}) − ({c} − {d})", paired, confidence, ctx))


# ------------------------------------------------------------------------------------ points on a gap curve


def _at_point(curves: pd.DataFrame, point: float, at: str) -> pd.DataFrame:
    logged = np.unique(curves[at].to_numpy(dtype=float))
    rows = curves[curves[at].astype(float) == float(point)]
    if rows.empty:
        side = [x for x in (logged[logged < point][-1:], logged[logged > point][:1]) for x in x]
        raise AnalysisError(f"gap curve: no validation at {at}={point:g}; the nearest logged are "
                            f"{', '.join(f'{x:g}' for x in side)} (points are never interpolated here)")
    if rows.duplicated(["variant", "seed"]).any():
        raise AnalysisError(f"gap curve: a run logged {at}={point:g} twice; keep one row per run and point")
    return rows


def gap_at(curves: pd.DataFrame, a: str, b: str, point: float, at: str = "tokens", paired: bool = True,
           confidence: float = CONFIDENCE) -> Tested:
    """The gap a - b at one logged validation point (`at`: tokens or step), paired by seed.
    curves: columns seed, variant, `at`, value (a run's validation curve, one row per point)."""
    _need(curves, ("seed", "variant", at, "value"), "gap_at")
    rows = _at_point(curves, point, at)
    return linear_contrast(rows, {a: 1.0, b: -1.0}, f"{a} − {b} at {at}={point:g}", paired, confidence,
                           (("variant_a", a), ("variant_b", b), (at, point)))


def gap_change(curves: pd.DataFrame, a: str, b: str, first: float, second: float, at: str = "tokens",
               paired: bool = True, confidence: float = CONFIDENCE) -> Tested:
    """(a - b at `second`) - (a - b at `first`): does the gap differ between two logged points?
    Paired: per seed, t over seeds. Unpaired: each run's own change (the same run at both points),
    Welch between the arms."""
    _need(curves, ("seed", "variant", at, "value"), "gap_change")
    one, two = _at_point(curves, first, at), _at_point(curves, second, at)
    name = f"({a} − {b}) at {at}={second:g} minus at {at}={first:g}"
    ctx = (("variant_a", a), ("variant_b", b), (f"{at}_first", first), (f"{at}_second", second))
    change = (two.set_index(["variant", "seed"])["value"] - one.set_index(["variant", "seed"])["value"]).dropna()
    runs = change.rename("value").reset_index()
    return linear_contrast(runs, {a: 1.0, b: -1.0}, name, paired, confidence, ctx)
