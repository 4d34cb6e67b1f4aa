"""The paired gap over a compute ladder (sizes x budgets x seeds), read as the design allows.

Input: one row per (size, budget, seed) with the paired gap (arm minus baseline, same seed, size and
budget, common random numbers) and the cell's n (parameters: pass one count that is the same for
both arms of a size, e.g. params.body), d (training tokens) and compute (FLOPs), columns
size, budget, seed, gap, n, d, compute.

**The model.** gap_cs = f(cell) + u_c + e_cs: a cell effect u_c ~ N(0, s2_cell) that every seed of
the cell shares (how that size trains at that budget, which no seed replicates) and a seed residual
e_cs ~ N(0, s2_seed). A seed-only interval treats the 36 points of a 12-cell, 3-seed ladder as 36
replicates of the fitted line, or the per-seed slopes as independent estimates of it; both ignore
u_c, which every seed shares, so they are too narrow whenever s2_cell > 0 (tests/test_analysis_
ladder_gap.py measures it). A seed effect shared across cells (the data order a seed fixes at
every size) is absorbed by the intercept of any fit on cell means.

**The fit** (random-cell model, method of moments): least squares on the cell means ybar_c with
weights w_c = 1 / (s2_cell + s2_seed / k_c) (k_c seeds in the cell), s2_seed the pooled within-cell
variance and s2_cell = max(0, residual mean square of the unweighted fit - mean(s2_seed / k_c)).
Coefficient standard errors are s2 (X'WX)^-1 with s2 the weighted residual mean square, and t
intervals with (cells - parameters) df. With every cell at the same number of seeds the weights are
equal and this is ordinary least squares on the cell means, whose t interval is exact under the
model (Var(ybar_c) = s2_cell + s2_seed / k is the same for every cell); it then equals the REML
fit of a random-intercept model (statsmodels MixedLM; the tests compare the two). Regressors are
log10 of n, d and compute, centred at their mean over cells, so a linear coefficient in a model
with squared terms is the slope at the ladder's centre.

- **compute slope**: gap on log10 C (bits per byte per decade of compute); its **curvature**: the
  log10 C^2 coefficient of the quadratic fit.
- **two factors**: gap on log10 N and log10 D: the slope over size at fixed budget and over budget
  at fixed size. **Curvature**: log10 N^2, log10 D^2 and log10 N x log10 D added, an F test of the
  three together (extra sum of squares) and each term's t.
- **per size over budget** and **per budget over size**: a line per size in log10 D (per budget in
  log10 N), all in one fit, so each slope's interval uses the residual variance pooled over the
  ladder (lack of fit included).
- **two-stage cluster bootstrap** of the compute slope: resample cells with replacement, then each
  drawn cell's seeds with replacement, refit on the cell means; percentile interval. A second view,
  not the primary interval: with 12 clusters it covers below nominal (91.1% of 1000 synthetic
  3 x 4 x 3 ladders at s_cell = 0.05, s_seed = 0.01, where the random-cell t interval covered 95.1%
  and the seed-only one 31.4%), and resampling at both stages is conservative when s2_cell is small.
- **seed-only** compute slope: per-seed least-squares slopes, a t interval over seeds. Shown so a
  report can say why it is not used.

The reading (`reading`): "decreases with compute" / "increases with compute" only where the random-
cell interval of the compute slope excludes 0; otherwise, and always beside it, what each factor
shows. `extrapolate` predicts at a point outside the ladder and labels it an extrapolation with its
distance in orders of magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..errors import AnalysisError
from .core import CONFIDENCE
from .rows import DOWN, NOT_SHOWN, UP, Tested, from_se, t_row

COLUMNS = ("size", "budget", "seed", "gap", "n", "d", "compute")
BASE = {"N": "n", "D": "d", "C": "compute"}   # regressor name -> column; each enters as log10, centred
N_BOOT = 2000
BOOT_SEED = 0
PER_DECADE = "bits per byte per decade"


# ------------------------------------------------------------------------------------ cells


def cell_means(gaps: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, budget), sorted: n, d, compute, the mean gap over seeds, k (seeds), sd and
    ss (the sum of squares about the cell mean)."""
    missing = set(COLUMNS) - set(gaps.columns)
    if missing:
        raise AnalysisError(f"ladder gap: the gaps frame lacks column(s) {sorted(missing)}; "
                            f"give one row per size, budget and seed with {', '.join(COLUMNS)}")
    gaps = gaps[np.isfinite(gaps["gap"].astype(float))]
    if gaps.duplicated(["size", "budget", "seed"]).any():
        raise AnalysisError("ladder gap: a (size, budget, seed) appears twice; give one paired gap per seed and cell")
    for column in ("n", "d", "compute"):
        values = pd.to_numeric(gaps[column], errors="coerce")
        if not (np.isfinite(values) & (values > 0)).all():
            raise AnalysisError(f"ladder gap: column {column!r} must be positive numbers (log10 is taken)")
    ids, keys = pd.factorize(pd.MultiIndex.from_frame(gaps[["size", "budget"]]), sort=True)
    k = np.bincount(ids)
    out = pd.DataFrame({"size": keys.get_level_values(0), "budget": keys.get_level_values(1)})
    for column in ("n", "d", "compute"):
        values = gaps[column].to_numpy(dtype=float)
        first = np.full(len(k), np.nan)
        first[ids[::-1]] = values[::-1]     # each cell's first value
        if not np.allclose(values, first[ids], rtol=1e-12, atol=0):
            raise AnalysisError("ladder gap: n, d and compute must be one value per (size, budget) cell")
        out[column] = first
    y = gaps["gap"].to_numpy(dtype=float)
    mean = np.bincount(ids, weights=y) / k
    ss = np.bincount(ids, weights=(y - mean[ids]) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["sd"] = np.where(k > 1, np.sqrt(ss / np.maximum(k - 1, 1)), np.nan)
    out["gap"], out["k"], out["ss"] = mean, k, ss
    return out


def seed_variance(cells: pd.DataFrame) -> float:
    """Pooled within-cell variance of the gap over seeds, from cell_means' ss and k (NaN without a
    cell of two seeds)."""
    dof = float((cells["k"] - 1).clip(lower=0).sum())
    return float(cells["ss"].sum() / dof) if dof > 0 else math.nan


# ------------------------------------------------------------------------------------ weighted fits on cells


@dataclass(frozen=True)
class CellFit:
    """Weighted least squares on cell means; coefficients named by their terms (see `_design`)."""
    terms: tuple[str, ...]
    beta: np.ndarray
    cov: np.ndarray
    dof: int
    rss: float
    s2: float
    n_cells: int
    centre: dict
    s2_cell: float
    s2_seed: float
    weights: np.ndarray
    confidence: float = CONFIDENCE
    unit: str = "cells"

    @property
    def weighted(self) -> bool:
        return bool(np.ptp(self.weights) > 0)

    def coef(self, term: str, name: str = "", context: tuple = ()) -> Tested:
        i = self.terms.index(term)
        method = ("random-cell model: " + ("weighted (method-of-moments weights) " if self.weighted else "")
                  + f"least squares on {self.n_cells} cell means, t with {self.dof} df")
        return from_se(name or term, float(self.beta[i]), float(math.sqrt(self.cov[i, i])) if self.dof > 0 else
                       math.nan, self.dof, self.n_cells, method, self.confidence, self.unit, context)

    def predict(self, row: dict) -> tuple[float, float]:
        """Fitted mean and its standard error at a point given as {'N': n, 'D': d, 'C': compute} (raw)."""
        x = _row_design(self.terms, {k: math.log10(v) - self.centre[k] for k, v in row.items() if k in self.centre})
        return float(x @ self.beta), float(math.sqrt(max(x @ self.cov @ x, 0.0)))


def _log_centred(cells: pd.DataFrame) -> tuple[dict, dict]:
    logs = {k: np.log10(cells[col].to_numpy(dtype=float)) for k, col in BASE.items()}
    centre = {k: float(v.mean()) for k, v in logs.items()}
    return {k: v - centre[k] for k, v in logs.items()}, centre


def _term_value(term: str, values: dict):
    """'1' | 'N' | 'D' | 'C' | products such as 'N*D', 'C*C'."""
    if term == "1":
        return 1.0
    out = 1.0
    for factor in term.split("*"):
        out = out * values[factor]
    return out


def _row_design(terms, values: dict) -> np.ndarray:
    if any(t.startswith("@") for t in terms):
        raise AnalysisError("ladder gap: a fit with a line per size or budget predicts no new point")
    missing = {f for t in terms if t != "1" for f in t.split("*")} - set(values)
    if missing:
        raise AnalysisError(f"ladder gap: a prediction needs {sorted(missing)} (of N, D, C)")
    return np.array([_term_value(t, values) for t in terms], dtype=float)


def _design(cells: pd.DataFrame, terms: tuple[str, ...], logs: dict) -> np.ndarray:
    cols, labels = [], {}
    for term in terms:
        if term.startswith("@"):   # '@size=ladder_d32' or '@size=ladder_d32*D': a group indicator (x a slope)
            group, _, slope = term[1:].partition("*")
            key, _, level = group.partition("=")
            if key not in labels:
                labels[key] = cells[key].astype(str).to_numpy()
            indicator = (labels[key] == level).astype(float)
            cols.append(indicator * (logs[slope] if slope else 1.0))
        else:
            cols.append(np.broadcast_to(_term_value(term, logs), len(cells)).astype(float))
    return np.column_stack(cols)


def fit_cells(cells: pd.DataFrame, terms: tuple[str, ...], s2_seed: float, confidence: float = CONFIDENCE,
              weights: np.ndarray | None = None) -> CellFit:
    """The random-cell fit of the cell means on `terms` (module docstring); `weights` given: use them
    (a nested model is compared with the same weights as the larger one)."""
    logs, centre = _log_centred(cells)
    x = _design(cells, terms, logs)
    y = cells["gap"].to_numpy(dtype=float)
    k = cells["k"].to_numpy(dtype=float)
    n, p = x.shape
    if np.linalg.matrix_rank(x) < p:
        raise AnalysisError(f"ladder gap: the ladder's cells cannot identify {', '.join(terms)} "
                            f"({n} cells); use more sizes or budgets or fewer terms")
    dof = n - p
    beta0, *_ = np.linalg.lstsq(x, y, rcond=None)
    rss0 = float(((y - x @ beta0) ** 2).sum())
    seed_part = s2_seed / k if math.isfinite(s2_seed) else np.zeros(n)
    s2_cell = max(0.0, rss0 / dof - float(np.mean(seed_part))) if dof > 0 else math.nan
    balanced = len(np.unique(k)) == 1
    if weights is not None:
        w = np.asarray(weights, dtype=float)
    elif balanced or not math.isfinite(s2_cell):
        w = np.ones(n)
    else:
        w = 1.0 / (s2_cell + seed_part)
    if not np.all(np.isfinite(w)) or not np.all(w > 0):
        w = np.ones(n)
    w = w / w.mean()
    root = np.sqrt(w)
    beta, *_ = np.linalg.lstsq(x * root[:, None], y * root, rcond=None)
    resid = y - x @ beta
    rss = float((w * resid ** 2).sum())
    s2 = rss / dof if dof > 0 else math.nan
    xtwx_inv = np.linalg.inv(x.T @ (w[:, None] * x))
    return CellFit(tuple(terms), beta, s2 * xtwx_inv, dof, rss, s2, n, centre, s2_cell, s2_seed, w, confidence)


def extra_ss_test(cells: pd.DataFrame, small_terms: tuple[str, ...], big: CellFit, name: str,
                  context: tuple = ()) -> Tested:
    """F test of the terms `big` adds to `small_terms` (refitted on the same cells with big's weights);
    the row's estimate is F, its p the F test's."""
    small = fit_cells(cells, small_terms, big.s2_seed, big.confidence, big.weights)
    q = len(big.terms) - len(small.terms)
    added = [t for t in big.terms if t not in small.terms]
    method = f"F test of {', '.join(added)} added ({q}, {big.dof} df) on the cell means"
    if big.dof <= 0 or q <= 0 or not big.s2 > 0:
        return Tested(name, math.nan, math.nan, math.nan, math.nan, big.n_cells, math.nan, method, "cells",
                      context=context, confidence=big.confidence)
    f = (small.rss - big.rss) / q / big.s2
    return Tested(name, float(f), math.nan, math.nan, float(sps.f.sf(f, q, big.dof)), big.n_cells, float(big.dof),
                  method, "cells", context=context, confidence=big.confidence)


# ------------------------------------------------------------------------------------ seed-only and bootstrap


def seed_only_slope(gaps: pd.DataFrame, confidence: float = CONFIDENCE, context: tuple = ()) -> Tested:
    """Per-seed least-squares slope of the gap on log10 C, t over seeds: the interval that treats the
    seeds as the only source of variation (it under-covers when cells vary; module docstring)."""
    slopes = []
    for _, part in gaps.groupby("seed"):
        u = np.log10(part["compute"].to_numpy(dtype=float))
        if len(np.unique(u)) >= 2:
            slopes.append(float(np.polyfit(u, part["gap"].to_numpy(dtype=float), 1)[0]))
    return t_row("gap slope per decade of compute", slopes,
                 "seed-only: per-seed least-squares slope on log10 C, t over seeds (ignores the cell effect)",
                 confidence, context=context)


def cluster_bootstrap_slope(gaps: pd.DataFrame, n_boot: int = N_BOOT, rng_seed: int = BOOT_SEED,
                            resample_seeds: bool = True, confidence: float = CONFIDENCE,
                            context: tuple = ()) -> Tested:
    """Two-stage cluster bootstrap of the compute slope: cells with replacement, then (resample_seeds)
    each drawn cell's seeds with replacement; the slope of the resampled cell means on log10 C.
    Percentile interval; p = 2 min(P*(slope <= 0), P*(slope >= 0)). Draws whose cells hold one
    compute value only are dropped (counted in the method string)."""
    rng = np.random.default_rng(rng_seed)
    ids, _ = pd.factorize(pd.MultiIndex.from_frame(gaps[["size", "budget"]]), sort=True)
    y_all, c_all = gaps["gap"].to_numpy(dtype=float), gaps["compute"].to_numpy(dtype=float)
    n_cells = int(ids.max()) + 1
    values = [y_all[ids == j] for j in range(n_cells)]
    u = np.array([math.log10(c_all[ids == j][0]) for j in range(n_cells)])
    picks = rng.integers(0, n_cells, size=(n_boot, n_cells))
    means = np.empty((n_boot, n_cells))
    for j, vals in enumerate(values):   # per cell: its resampled mean in every replicate
        k = len(vals)
        draws = vals[rng.integers(0, k, size=(n_boot, k))].mean(axis=1) if resample_seeds else np.full(n_boot, vals.mean())
        means[:, j] = draws
    y = np.take_along_axis(means, picks, axis=1)
    x = u[picks]
    xc = x - x.mean(axis=1, keepdims=True)
    sxx = (xc ** 2).sum(axis=1)
    ok = sxx > 1e-12
    slopes = (xc[ok] * y[ok]).sum(axis=1) / sxx[ok]
    full = float(np.polyfit(u, [v.mean() for v in values], 1)[0])
    tail = 50 * (1 - confidence)
    low, high = np.percentile(slopes, [tail, 100 - tail])
    p = float(min(1.0, 2 * min((slopes <= 0).mean(), (slopes >= 0).mean())))
    stage = "cells, then seeds within each" if resample_seeds else "cells"
    method = (f"two-stage cluster bootstrap ({stage}; {int(ok.sum())} of {n_boot} draws usable), "
              "percentile interval of the cell-mean slope on log10 C")
    return Tested("gap slope per decade of compute", full, float(low), float(high), p, n_cells, math.nan, method,
                  "cells", context=context, confidence=confidence)


# ------------------------------------------------------------------------------------ the ladder


COMPUTE_LINE = ("1", "C")
COMPUTE_QUADRATIC = ("1", "C", "C*C")
TWO_FACTOR = ("1", "N", "D")
TWO_FACTOR_CURVED = ("1", "N", "D", "N*N", "D*D", "N*D")


@dataclass(frozen=True)
class LadderGap:
    """Everything the ladder says about one arm's gap (module docstring); rows are `Tested`."""
    arm: str
    compute_slope: Tested
    compute_curvature: Tested
    size_slope: Tested
    budget_slope: Tested
    curvature: Tested                      # joint F of N^2, D^2, N x D
    curvature_terms: tuple[Tested, ...]
    per_size: tuple[Tested, ...]           # slope over budget (per decade of D) at each size
    per_budget: tuple[Tested, ...]         # slope over size (per decade of N) at each budget
    seed_only: Tested
    bootstrap: Tested
    compute_fit: CellFit
    two_factor_fit: CellFit
    cells: pd.DataFrame = field(repr=False)
    n_seeds: int = 0
    s2_cell: float = math.nan
    s2_seed: float = math.nan
    max_compute: float = math.nan
    max_n: float = math.nan
    max_d: float = math.nan


def _levels_need(cells: pd.DataFrame, sizes: int, budgets: int) -> None:
    have = cells["size"].nunique(), cells["budget"].nunique()
    if have[0] < sizes or have[1] < budgets:
        raise AnalysisError(f"ladder gap: needs at least {sizes} sizes and {budgets} budgets with a paired gap "
                            f"(has {have[0]} x {have[1]})")


def _group_slopes(cells: pd.DataFrame, group: str, slope: str, s2_seed: float, name: str, arm: str,
                  confidence: float) -> tuple[Tested, ...]:
    """A line per level of `group` (its own intercept and slope on `slope`), fitted together."""
    order_by = "n" if group == "size" else "d"     # sizes small to large, budgets short to long
    labels = cells[group].astype(str)
    counts = labels.value_counts()
    levels = labels.iloc[np.argsort(cells[order_by].to_numpy(), kind="stable")].drop_duplicates()
    usable = [lv for lv in levels if counts[lv] >= 2]
    terms = tuple(t for lv in usable for t in (f"@{group}={lv}", f"@{group}={lv}*{slope}"))
    part = cells[labels.isin(usable).to_numpy()]
    fit = fit_cells(part, terms, s2_seed, confidence)
    return tuple(fit.coef(f"@{group}={lv}*{slope}", name, (("arm", arm), (group, lv))) for lv in usable)


def ladder_gap(gaps: pd.DataFrame, arm: str = "", confidence: float = CONFIDENCE, n_boot: int = N_BOOT,
               rng_seed: int = BOOT_SEED) -> LadderGap:
    """The design-respecting reading of one arm's paired gap over a ladder (module docstring).
    Needs 3 sizes and 3 budgets (the curvature fit has 6 parameters)."""
    cells = cell_means(gaps)
    _levels_need(cells, 3, 3)
    gaps = gaps[np.isfinite(gaps["gap"].astype(float))]
    s2_seed = seed_variance(cells)
    ctx = (("arm", arm),)
    line = fit_cells(cells, COMPUTE_LINE, s2_seed, confidence)
    quad = fit_cells(cells, COMPUTE_QUADRATIC, s2_seed, confidence)
    two = fit_cells(cells, TWO_FACTOR, s2_seed, confidence)
    curved = fit_cells(cells, TWO_FACTOR_CURVED, s2_seed, confidence)
    terms = {"N*N": "log10 N squared", "D*D": "log10 D squared", "N*D": "log10 N x log10 D"}
    return LadderGap(
        arm=arm,
        compute_slope=line.coef("C", "gap slope per decade of compute", ctx),
        compute_curvature=quad.coef("C*C", "log10 C squared", ctx),
        size_slope=two.coef("N", "gap slope per decade of N at fixed D", ctx),
        budget_slope=two.coef("D", "gap slope per decade of D at fixed N", ctx),
        curvature=extra_ss_test(cells, TWO_FACTOR, curved, "curvature in log N and log D", ctx),
        curvature_terms=tuple(curved.coef(t, label, ctx) for t, label in terms.items()),
        per_size=_group_slopes(cells, "size", "D", s2_seed, "gap slope per decade of D at this size", arm, confidence),
        per_budget=_group_slopes(cells, "budget", "N", s2_seed, "gap slope per decade of N at this budget", arm,
                                 confidence),
        seed_only=seed_only_slope(gaps, confidence, ctx),
        bootstrap=cluster_bootstrap_slope(gaps, n_boot, rng_seed, True, confidence, ctx),
        compute_fit=line, two_factor_fit=two, cells=cells, n_seeds=int(gaps["seed"].nunique()),
        s2_cell=line.s2_cell, s2_seed=s2_seed, max_compute=float(cells["compute"].max()),
        max_n=float(cells["n"].max()), max_d=float(cells["d"].max()))


# ------------------------------------------------------------------------------------ what may be said


@dataclass(frozen=True)
class Reading:
    """What the rows allow: the compute trend (UP / DOWN / NOT_SHOWN), per-factor and per-level
    directions, whether curvature is shown, and sentences written from those rows alone."""
    arm: str
    compute: str
    size: str
    budget: str
    curved: bool
    per_size: tuple[tuple[str, str], ...]
    per_budget: tuple[tuple[str, str], ...]
    sentences: tuple[str, ...]


WORDS = {UP: "increases", DOWN: "decreases", NOT_SHOWN: "not shown"}


def _span(row: Tested, digits: int = 3) -> str:
    if not (math.isfinite(row.ci_low) and math.isfinite(row.ci_high)):
        return f"{row.estimate:+.{digits}f} (no interval)"
    return f"{row.estimate:+.{digits}f} [{row.ci_low:+.{digits}f}, {row.ci_high:+.{digits}f}]"


def _trend_words(row: Tested, over: str, alpha: float | None) -> str:
    shown = row.shown(alpha)
    if shown == NOT_SHOWN:
        return f"a trend {over} is not shown ({_span(row)} {PER_DECADE})"
    return f"the gap {WORDS[shown]} {over} ({_span(row)} {PER_DECADE})"


def _p(row: Tested) -> str:
    return f"{'Holm ' if row.family else ''}p = {row.p_decision:.2g}"


def reading(ladder: LadderGap, alpha: float | None = None) -> Reading:
    """The allowed reading: a compute trend only where the random-cell interval excludes 0 (or its
    family's Holm p, when the row was put in one), and what each factor shows beside it. Sentences
    start with the arm's name when the ladder has one."""
    who = f"{ladder.arm}: " if ladder.arm else ""
    compute = ladder.compute_slope.shown(alpha)
    curved_rows = (ladder.curvature, ladder.compute_curvature)
    curved = any(r.tested and r.p_decision < (1 - r.confidence if alpha is None else alpha) for r in curved_rows)
    first = f"{who}{_trend_words(ladder.compute_slope, 'with compute', alpha)}, random-cell model over " \
            f"{ladder.compute_slope.n} cells"
    if curved:
        first += (f"; the ladder is curved (log C squared {_p(ladder.compute_curvature)}, "
                  f"log N and log D curvature {_p(ladder.curvature)}), so a slope is an average over the range")
    sentences = [first + ".",
                 f"{who}at fixed budget, {_trend_words(ladder.size_slope, 'over model size', alpha)}; "
                 f"at fixed size, {_trend_words(ladder.budget_slope, 'over budget', alpha)}."]
    for rows, level, over in ((ladder.per_size, "size", "over budget"), (ladder.per_budget, "budget", "over model size")):
        parts = [f"at {r.get(level)}: {WORDS[r.shown(alpha)]} ({_span(r)})" for r in rows]
        sentences.append(f"{who}{over} ({PER_DECADE}), " + "; ".join(parts) + ".")
    return Reading(ladder.arm, compute, ladder.size_slope.shown(alpha), ladder.budget_slope.shown(alpha), curved,
                   tuple((str(r.get("size")), r.shown(alpha)) for r in ladder.per_size),
                   tuple((str(r.get("budget")), r.shown(alpha)) for r in ladder.per_budget), tuple(sentences))


@dataclass(frozen=True)
class Extrapolation:
    """A predicted gap outside (or inside) the ladder, with its interval and how far out it is."""
    estimate: float
    ci_low: float
    ci_high: float
    orders: tuple[tuple[str, float], ...]   # (C | N | D, log10(target / largest observed))
    label: str
    method: str
    flags: tuple[str, ...] = ()


def extrapolate(ladder: LadderGap, compute: float | None = None, n: float | None = None, d: float | None = None,
                confidence: float | None = None) -> Extrapolation:
    """The gap the ladder's fitted line predicts at a target: from the compute line at `compute`, or
    from the two-factor fit at (`n`, `d`). The interval is the fitted mean's t interval (random-cell
    model): it takes the line as true out to the target, which no ladder can check. The label says
    it is an extrapolation and how many orders of magnitude past the largest observed value."""
    if compute is not None:
        fit, point, observed = ladder.compute_fit, {"C": compute}, {"C": ladder.max_compute}
    elif n is not None and d is not None:
        fit, point, observed = ladder.two_factor_fit, {"N": n, "D": d}, {"N": ladder.max_n, "D": ladder.max_d}
    else:
        raise AnalysisError("extrapolate: give compute=, or both n= and d=")
    confidence = fit.confidence if confidence is None else confidence
    estimate, se = fit.predict(point)
    half = float(sps.t.ppf(0.5 + confidence / 2, fit.dof)) * se if fit.dof > 0 else math.nan
    orders = tuple((k, math.log10(point[k] / observed[k])) for k in point)
    beyond = [f"{k} {o:.1f}" for k, o in orders if o > 0]
    label = ("extrapolation: " + ", ".join(beyond) + " orders of magnitude past the largest observed"
             if beyond else "inside the observed range")
    flags = []
    curved = ladder.compute_curvature if compute is not None else ladder.curvature
    if curved.tested and curved.p_decision < 1 - confidence:
        flags.append(f"the ladder rejects a straight line (curvature {_p(curved)}); the prediction assumes one")
    method = (f"fitted mean of the random-cell {'compute line' if compute is not None else 'two-factor fit'} "
              f"with its t interval ({fit.dof} df)")
    return Extrapolation(estimate, estimate - half, estimate + half, orders, label, method, tuple(flags))
