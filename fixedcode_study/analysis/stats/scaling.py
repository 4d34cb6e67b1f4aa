"""Scaling fits of the fixed-code gap (issue 25): a loss law per arm, a direct fit of the paired gap
against training compute, and their predictions with seed-bootstrap intervals.

**The law** (Hoffmann et al. 2022, "approach 3"): L(N, D) = E + A / N^alpha + B / D^beta, fitted as
they do, in log space: with a = log A, b = log B, e = log E, minimise

    sum_i  Huber_delta( LSE(a - alpha log N_i, b - beta log D_i, e) - log L_i ),   delta = 1e-3,

by L-BFGS from a grid of initialisations, keeping the best. Besiroglu et al. 2024 ("Chinchilla
scaling: a replication attempt") found the published fit stopped early, on loose tolerances, and
gave implausibly narrow intervals; the lessons applied here:
- the objective is scaled (1 / (delta^2 sum w): about the mean |residual| / delta) so L-BFGS-B's
  tolerances (ftol 1e-15, projected gradient 1e-10, up to 20,000 iterations) mean convergence, and
  `converged` says whether the best start got there;
- the objective is evaluated at every point of Hoffmann's grid (alpha, beta in 0..2 by 0.5,
  e in -1..1.5 by 0.5, a, b in 0..25 by 5: 5,400 points), and L-BFGS runs from its best points and
  from the best point of every (alpha, beta) pair, so no exponent region is left unexplored: 60
  iterations from each, then the 6 best distinct results to convergence (running all 5,400 starts
  to convergence took minutes per fit on 2 CPU cores);
- intervals come from a bootstrap that resamples whole seeds (every cell of a drawn seed comes along),
  not points: a seed's runs share data order and initialisation streams, so points are not
  independent, and the seed is the unit the study replicates;
- the fit says when it is not to be trusted: too few sizes or budgets for five parameters, a parameter
  at its bound or outside the initialisation grid, starts that reach the same objective with
  different exponents (a flat objective), bootstrap fits that fail or hit bounds, intervals wider
  than the estimate, and a bootstrap with few distinct resamples (3 seeds give only 10).
Loss here is whatever is passed in; the analysis passes val bpb. Fitting nats instead gives the same
exponents: bpb is nats times a constant on one validation set, and a constant factor only shifts
log L, which a, b and e absorb.

**The gap fit**: the paired gap (fixed minus learned, same seed, same size and budget) against
training compute C (flops_per_token x tokens): gap = c0 + c1 log10 C, least squares. A straight line
in log C, not a power law: a power law k C^-gamma needs a gap of one sign everywhere, and small-scale
gaps straddle zero. The slope is "bits per byte per decade of compute". Same seed bootstrap.

**Predictions** at any (N, D) or C are the full-sample fit's value with the bootstrap's percentile
interval; `orders` gives the extrapolation distance, log10(target / largest value observed).
Parameter conventions (Pearce & Song 2024: the choice moves fitted exponents at small scale):
`CHINCHILLA` counts every trained parameter (learned: with the table; fixed code: none to count),
`KAPLAN` non-embedding parameters only (the body: no input table, no output head).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from .core import CONFIDENCE

HUBER_DELTA = 1e-3
# Hoffmann et al. 2022, appendix D.2: the initialisation grid of approach 3.
GRID = {"alpha": np.arange(0.0, 2.0 + 1e-9, 0.5), "beta": np.arange(0.0, 2.0 + 1e-9, 0.5),
        "e": np.arange(-1.0, 1.5 + 1e-9, 0.5), "a": np.arange(0.0, 25.0 + 1e-9, 5.0),
        "b": np.arange(0.0, 25.0 + 1e-9, 5.0)}
ORDER = ("a", "b", "e", "alpha", "beta")   # theta's layout
# Wide enough for any law of a language model seen so far; a parameter that ends on one is flagged.
BOUNDS = {"a": (-50.0, 200.0), "b": (-50.0, 200.0), "e": (-20.0, 10.0), "alpha": (0.0, 5.0), "beta": (0.0, 5.0)}
BEST_STARTS = 8           # L-BFGS from this many best grid points, plus the best of each (alpha, beta)
SCOUT_ITERATIONS, POLISHED = 60, 6   # each start scouts this far; the best distinct POLISHED run to convergence
BOOT_STARTS = 2           # a bootstrap fit starts from the full-sample fit's best distinct optima
N_BOOT = 400
BOOT_SEED = 0             # the bootstrap's own generator: same data, same intervals
MIN_LEVELS = 3            # sizes and budgets each, for five parameters
FLAT_RTOL, FLAT_SPREAD = 1e-4, 0.05   # starts within 0.01% of the best objective that differ by 0.05 in an exponent
COARSE_RESAMPLES = 20
LBFGS = {"maxiter": 20_000, "maxfun": 200_000, "ftol": 1e-15, "gtol": 1e-10, "maxls": 50}
SCOUT = {**LBFGS, "maxiter": SCOUT_ITERATIONS}
CONVERGED_PGRAD = 1e-6    # L-BFGS-B may stop on a line search at machine precision: converged if this flat

CHINCHILLA, KAPLAN = "chinchilla", "kaplan"
CONVENTIONS = {CHINCHILLA: "all trained parameters (learned: with the input table; both with the head)",
               KAPLAN: "non-embedding parameters (the body: no input table, no output head)"}


# ------------------------------------------------------------------------------------ bootstrap


@dataclass(frozen=True)
class Draws:
    """Seed resamples shared by every fit of one study, so replicate k of two arms is the same seeds
    (their predicted gap is then paired). counts[k, j]: how often seeds[j] is drawn in replicate k."""
    seeds: tuple
    counts: np.ndarray

    @property
    def distinct(self) -> int:
        return len({row.tobytes() for row in self.counts})


def seed_draws(seeds, n_boot: int = N_BOOT, rng_seed: int = BOOT_SEED) -> Draws:
    labels = tuple(sorted(set(seeds)))
    rng = np.random.default_rng(rng_seed)
    picks = rng.integers(0, len(labels), size=(n_boot, len(labels)))
    counts = np.stack([np.bincount(row, minlength=len(labels)) for row in picks]) if len(labels) else \
        np.zeros((n_boot, 0), dtype=int)
    return Draws(labels, counts)


def _point_weights(draws: Draws, seeds: np.ndarray) -> np.ndarray:
    """Per replicate, each point's weight: the count of its seed (B x n)."""
    index = {s: j for j, s in enumerate(draws.seeds)}
    cols = np.array([index[s] for s in seeds], dtype=int)
    return draws.counts[:, cols].astype(float)


def interval(samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of the finite samples; (nan, nan) when fewer than half are finite."""
    values = np.asarray(samples, dtype=float)
    finite = values[np.isfinite(values)]
    if values.size == 0 or finite.size < 0.5 * values.size:
        return math.nan, math.nan
    tail = 50 * (1 - confidence)
    return float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))


def orders(target: float, observed_max: float) -> float:
    """Orders of magnitude from the largest value observed to the target (negative: inside the range)."""
    if not (target > 0 and observed_max > 0):
        return math.nan
    return math.log10(target / observed_max)


# ------------------------------------------------------------------------------------ the law


def _lse_parts(theta: np.ndarray, x: np.ndarray, y: np.ndarray):
    """log of the three terms for each theta row (G x 5) and point: LSE and the softmax weights."""
    theta = np.atleast_2d(theta)
    a, b, e, alpha, beta = (theta[:, i:i + 1] for i in range(5))
    terms = np.stack([a - alpha * x, b - beta * y, np.broadcast_to(e, (theta.shape[0], x.size))])
    top = terms.max(axis=0)
    shifted = np.exp(terms - top)
    total = shifted.sum(axis=0)
    return top + np.log(total), shifted / total


def _huber(r: np.ndarray, delta: float) -> np.ndarray:
    absr = np.abs(r)
    return np.where(absr <= delta, 0.5 * r * r, delta * (absr - 0.5 * delta))


def _objective(theta, x, y, log_loss, w, delta):
    """The scaled Huber objective of one theta and its gradient (written out: it runs ~10^5 times)."""
    a, b, e, alpha, beta = theta
    t1, t2 = a - alpha * x, b - beta * y
    top = np.maximum(np.maximum(t1, t2), e)
    p1, p2, p3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
    total = p1 + p2 + p3
    r = top + np.log(total) - log_loss
    scale = 1.0 / (delta * delta * w.sum())
    absr = np.abs(r)
    value = scale * float(w @ np.where(absr <= delta, 0.5 * r * r, delta * (absr - 0.5 * delta)))
    g = (scale * w * np.clip(r, -delta, delta)) / total
    g1, g2 = g * p1, g * p2
    return value, np.array([g1.sum(), g2.sum(), g @ p3, -(g1 @ x), -(g2 @ y)])


def _grid() -> np.ndarray:
    mesh = np.meshgrid(*(GRID[k] for k in ORDER), indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def _grid_objective(grid: np.ndarray, x, y, log_loss, w, delta) -> np.ndarray:
    out = np.empty(len(grid))
    for start in range(0, len(grid), 600):   # chunks keep the G x n arrays small
        lse, _ = _lse_parts(grid[start:start + 600], x, y)
        out[start:start + 600] = (w * _huber(lse - log_loss, delta)).sum(axis=1)
    return out / (delta * delta * w.sum())


def _starts(grid: np.ndarray, values: np.ndarray, best: int, per_exponent: bool) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    chosen = list(order[:best])
    if per_exponent:
        cell = grid[:, 3] * 10 + grid[:, 4]
        for key in np.unique(cell):
            members = np.flatnonzero(cell == key)
            chosen.append(members[np.argmin(values[members])])
    return grid[sorted(set(chosen))]


_BOUNDS = [BOUNDS[k] for k in ORDER]


def _minimise(start, x, y, log_loss, w, delta, options=None):
    res = optimize.minimize(_objective, start, args=(x, y, log_loss, w, delta), jac=True, method="L-BFGS-B",
                            bounds=_BOUNDS, options=options or LBFGS)
    lo, hi = np.array(_BOUNDS).T
    grad = res.jac
    # projected gradient: a component pushing against an active bound does not count
    proj = np.where((res.x <= lo + 1e-12) & (grad > 0) | (res.x >= hi - 1e-12) & (grad < 0), 0.0, grad)
    converged = bool(res.success) or float(np.max(np.abs(proj))) < CONVERGED_PGRAD
    return res.x, float(res.fun), converged


def _fit_weighted(x, y, log_loss, w, delta, starts: np.ndarray) -> tuple[np.ndarray, float, bool, list]:
    """L-BFGS from every start on the points of positive weight; the best run and all runs."""
    keep = w > 0
    x, y, log_loss, w = x[keep], y[keep], log_loss[keep], w[keep]
    if len(starts) > POLISHED:
        # every start gets SCOUT_ITERATIONS of L-BFGS; the best distinct few are then run to convergence
        scouted = [_minimise(s, x, y, log_loss, w, delta, SCOUT) for s in starts]
        starts = _local_optima(scouted, POLISHED)
    runs = [_minimise(s, x, y, log_loss, w, delta) for s in starts]
    theta, value, converged = min(runs, key=lambda r: r[1])
    return theta, value, converged, runs


def _local_optima(runs: list, limit: int) -> np.ndarray:
    """The best distinct optima the full-sample starts reached (rounded to 1e-3), best first: a
    bootstrap fit starts from each, so it may move to another basin but needs no grid of its own."""
    seen, out = set(), []
    for theta, _, _ in sorted(runs, key=lambda r: r[1]):
        key = tuple(np.round(theta, 3))
        if key not in seen:
            seen.add(key)
            out.append(theta)
        if len(out) == limit:
            break
    return np.array(out)


@dataclass
class LawFit:
    """L = E + A/N^alpha + B/D^beta for one arm; theta = (a, b, e, alpha, beta), boot: one row per replicate."""
    theta: np.ndarray
    objective: float
    converged: bool
    flags: list[str]
    n_points: int
    sizes: int
    budgets: int
    seeds: int
    starts: int
    boot: np.ndarray = field(default_factory=lambda: np.empty((0, 5)))
    distinct_resamples: int = 0
    confidence: float = CONFIDENCE
    max_n: float = math.nan
    max_d: float = math.nan

    @property
    def fitted(self) -> bool:
        return bool(np.all(np.isfinite(self.theta)))

    @staticmethod
    def named(theta: np.ndarray) -> dict[str, float]:
        a, b, e, alpha, beta = theta
        return {"E": math.exp(e), "A": math.exp(a), "alpha": alpha, "B": math.exp(b), "beta": beta}

    @property
    def params(self) -> dict[str, float]:
        return self.named(self.theta) if self.fitted else dict.fromkeys(("E", "A", "alpha", "B", "beta"), math.nan)

    def ci(self, name: str) -> tuple[float, float]:
        if not len(self.boot):
            return math.nan, math.nan
        idx = {"E": 2, "A": 0, "alpha": 3, "B": 1, "beta": 4}[name]
        column = self.boot[:, idx]
        return interval(column if name in ("alpha", "beta") else np.exp(column), self.confidence)

    def predict(self, n: float, d: float) -> float:
        return float(law(self.theta, n, d)) if self.fitted else math.nan

    def boot_predict(self, n: float, d: float) -> np.ndarray:
        if not len(self.boot):
            return np.empty(0)
        return np.array([law(t, n, d) if np.all(np.isfinite(t)) else math.nan for t in self.boot])


def law(theta: np.ndarray, n, d):
    """E + A/N^alpha + B/D^beta from theta = (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = theta
    return np.exp(e) + np.exp(a - alpha * np.log(n)) + np.exp(b - beta * np.log(d))


def _at_bound(theta: np.ndarray) -> list[str]:
    out = []
    for i, name in enumerate(ORDER):
        lo, hi = BOUNDS[name]
        if min(theta[i] - lo, hi - theta[i]) <= 1e-6 * max(1.0, abs(lo), abs(hi)):
            out.append(name)
    return out


def _outside_grid(theta: np.ndarray) -> list[str]:
    return [name for i, name in enumerate(ORDER)
            if not GRID[name].min() - 1e-9 <= theta[i] <= GRID[name].max() + 1e-9]


def one_blas_thread():
    """L-BFGS-B over five variables calls BLAS on tiny vectors; with OpenBLAS's threads on a busy
    2-core box one fit took 1.7 s instead of 0.25 s (measured). threadpoolctl comes with
    scikit-learn, a dependency; without it the fit is only slower."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn always brings it
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def fit_law(n, d, loss, seeds, draws: Draws | None = None, delta: float = HUBER_DELTA,
            confidence: float = CONFIDENCE) -> LawFit:
    """Fit the law to one arm's points (parameters n, tokens d, loss, seed per point)."""
    with one_blas_thread():
        return _fit_law(n, d, loss, seeds, draws, delta, confidence)


def _fit_law(n, d, loss, seeds, draws, delta, confidence) -> LawFit:
    x, y = np.log(np.asarray(n, dtype=float)), np.log(np.asarray(d, dtype=float))
    log_loss = np.log(np.asarray(loss, dtype=float))
    seeds = np.asarray(seeds)
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(log_loss)
    x, y, log_loss, seeds = x[ok], y[ok], log_loss[ok], seeds[ok]
    sizes, budgets = len(np.unique(x)), len(np.unique(y))
    base = {"n_points": int(ok.sum()), "sizes": sizes, "budgets": budgets, "seeds": len(set(seeds.tolist())),
            "confidence": confidence, "max_n": float(np.exp(x.max())) if x.size else math.nan,
            "max_d": float(np.exp(y.max())) if y.size else math.nan}
    if sizes < MIN_LEVELS or budgets < MIN_LEVELS:
        why = (f"not fitted: five parameters need at least {MIN_LEVELS} model sizes and {MIN_LEVELS} token budgets "
               f"(here {sizes} x {budgets})")
        return LawFit(np.full(5, math.nan), math.nan, False, [why], starts=0, **base)
    grid = _grid()
    w = np.ones_like(x)
    starts = _starts(grid, _grid_objective(grid, x, y, log_loss, w, delta), BEST_STARTS, True)
    theta, value, converged, runs = _fit_weighted(x, y, log_loss, w, delta, starts)
    flags = []
    if not converged:
        flags.append("the optimizer did not converge from the best start")
    if bound := _at_bound(theta):
        flags.append(f"at a bound: {', '.join(bound)} (weakly identified)")
    if math.exp(theta[2]) < 0.01 * math.exp(log_loss.min()):
        flags.append("E near 0: the irreducible loss is not identified by these points (the power terms absorb it)")
    if outside := _outside_grid(theta):
        flags.append(f"outside the initialisation grid: {', '.join(outside)}")
    near = [r for r in runs if r[2] and r[1] <= value * (1 + FLAT_RTOL) + 1e-12]
    for i, name in ((3, "alpha"), (4, "beta")):
        spread = [r[0][i] for r in near]
        if max(spread) - min(spread) > FLAT_SPREAD:
            flags.append(f"flat objective: starts within {FLAT_RTOL:.0e} of the best objective give {name} "
                         f"from {min(spread):.3g} to {max(spread):.3g} (not identified)")
    fit = LawFit(theta, value, converged, flags, starts=len(starts), **base)
    if draws is not None:
        _bootstrap_law(fit, x, y, log_loss, seeds, draws, delta, _local_optima(runs, BOOT_STARTS))
    return fit


def _bootstrap_law(fit: LawFit, x, y, log_loss, seeds, draws: Draws, delta, starts: np.ndarray) -> None:
    weights = _point_weights(draws, seeds)
    done: dict[bytes, tuple[np.ndarray, bool]] = {}
    boot, failed = [], 0
    for w in weights:
        key = w.tobytes()
        if key not in done:
            enough = len(np.unique(x[w > 0])) >= MIN_LEVELS and len(np.unique(y[w > 0])) >= MIN_LEVELS
            if enough:
                theta, _, ok, _ = _fit_weighted(x, y, log_loss, w, delta, starts)
                done[key] = (theta, ok and not _at_bound(theta))
            else:
                done[key] = (np.full(5, math.nan), False)
        theta, ok = done[key]
        failed += not ok
        boot.append(theta)
    fit.boot = np.array(boot)
    fit.distinct_resamples = len(done)
    if failed > 0.1 * len(weights):
        fit.flags.append(f"{failed} of {len(weights)} bootstrap fits did not converge or ended at a bound")
    if fit.distinct_resamples < COARSE_RESAMPLES:
        fit.flags.append(f"coarse interval: {fit.seeds} seeds give only {fit.distinct_resamples} distinct resamples")
    for name in ("alpha", "beta"):
        lo, hi = fit.ci(name)
        estimate = fit.params[name]
        if np.isfinite(lo) and (hi - lo > abs(estimate) or lo <= BOUNDS[name][0] + 1e-6):
            fit.flags.append(f"weakly identified: {name} = {estimate:.3g}, {confidence_label(fit.confidence)} "
                             f"interval [{lo:.3g}, {hi:.3g}]")


def confidence_label(confidence: float) -> str:
    return f"{100 * confidence:g}%"


# ------------------------------------------------------------------------------------ the gap against compute


@dataclass
class GapFit:
    """gap = intercept + slope * log10 C over paired points; boot: (B x 2) replicate coefficients."""
    intercept: float
    slope: float
    n_pairs: int
    seeds: int
    computes: int
    flags: list[str]
    max_c: float
    min_c: float
    boot: np.ndarray = field(default_factory=lambda: np.empty((0, 2)))
    distinct_resamples: int = 0
    confidence: float = CONFIDENCE

    @property
    def fitted(self) -> bool:
        return math.isfinite(self.slope)

    def predict(self, c: float) -> float:
        return self.intercept + self.slope * math.log10(c) if self.fitted else math.nan

    def boot_predict(self, c: float) -> np.ndarray:
        return self.boot[:, 0] + self.boot[:, 1] * math.log10(c) if len(self.boot) else np.empty(0)

    def slope_ci(self) -> tuple[float, float]:
        return interval(self.boot[:, 1], self.confidence) if len(self.boot) else (math.nan, math.nan)


def _line(u: np.ndarray, gap: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    keep = w > 0
    u, gap, w = u[keep], gap[keep], w[keep]
    if len(np.unique(u)) < 2:
        return math.nan, math.nan
    mu, mg = np.average(u, weights=w), np.average(gap, weights=w)
    slope = float(np.sum(w * (u - mu) * (gap - mg)) / np.sum(w * (u - mu) ** 2))
    return float(mg - slope * mu), slope


def fit_gap(compute, gap, seeds, draws: Draws | None = None, confidence: float = CONFIDENCE) -> GapFit:
    """Least squares of the paired gap on log10 compute, with a whole-seed bootstrap."""
    u = np.log10(np.asarray(compute, dtype=float))
    gap = np.asarray(gap, dtype=float)
    seeds = np.asarray(seeds)
    ok = np.isfinite(u) & np.isfinite(gap)
    u, gap, seeds = u[ok], gap[ok], seeds[ok]
    computes = len(np.unique(u))
    intercept, slope = _line(u, gap, np.ones_like(u))
    flags = [] if computes >= 2 else [f"not fitted: {computes} distinct compute value(s)"]
    fit = GapFit(intercept, slope, int(ok.sum()), len(set(seeds.tolist())), computes, flags,
                 float(10 ** u.max()) if u.size else math.nan, float(10 ** u.min()) if u.size else math.nan,
                 confidence=confidence)
    if draws is not None and fit.fitted:
        weights = _point_weights(draws, seeds)
        fit.boot = np.array([_line(u, gap, w) for w in weights])
        fit.distinct_resamples = len({w.tobytes() for w in weights})
        if fit.distinct_resamples < COARSE_RESAMPLES:
            fit.flags.append(f"coarse interval: {fit.seeds} seeds give only {fit.distinct_resamples} distinct resamples")
    return fit
