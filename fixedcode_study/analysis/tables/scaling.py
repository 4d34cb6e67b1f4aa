"""The Scaling section's tables and readings (issue 25), from a compute ladder's estimates
(results/scaling.py `Scaling`: the law L(N, D) per arm under both parameter conventions, the paired
gap against compute, the predictions at the paper's and the earlier version's (N, D) with
seed-bootstrap intervals). Every point traces to a run (tables/scaling_jobs.csv).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats import scaling as sc
from .render import Table
from .scaling_points import EARLIER_POINT

METRIC = "val_bpb"
EARLIER_ASSUMED = EARLIER_POINT.assumed.removeprefix("assumed: ")
NAMES = ("scaling_budgets", "scaling_laws", "scaling_gap_fit", "scaling_predictions", "scaling_jobs")


def g3(value: float) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.3g}"


def signed(value: float, digits: int = 3) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:+.{digits}f}"


def span(lo: float, hi: float, digits: int = 3) -> str:
    return "n/a" if not (np.isfinite(lo) and np.isfinite(hi)) else f"[{lo:.{digits}f}, {hi:.{digits}f}]"


# ------------------------------------------------------------------------------------ tables


def budgets_table(result) -> Table:
    p = result.points
    grouped = p.groupby(["model_size", "train_budget"], sort=False)
    data = grouped.agg(n_chinchilla_min=("n_chinchilla", "min"), n_chinchilla_max=("n_chinchilla", "max"),
                       n_kaplan=("n_kaplan", "first"), tokens_seen=("tokens", "max"), epochs_min=("epochs", "min"),
                       epochs_max=("epochs", "max"), compute=("compute", "max"), jobs=("run", "count"),
                       runs=("run", lambda r: ";".join(sorted(r)))).reset_index()
    data = data.sort_values(["n_kaplan", "train_budget"], kind="stable")
    rows = [[r.model_size, f"{round(r.train_budget):,}" if np.isfinite(r.train_budget) else "n/a",
             f"{round(r.n_chinchilla_min):,}–{round(r.n_chinchilla_max):,}", f"{round(r.n_kaplan):,}",
             f"{round(r.tokens_seen):,}", f"{r.epochs_min:.3f}" + ("" if r.epochs_max == r.epochs_min else f"–{r.epochs_max:.3f}"),
             g3(r.compute), str(r.jobs)] for r in data.itertuples()]
    caption = ("The ladder's cells: model size and token budget (config train.tokens), parameters per convention "
               "(Chinchilla: every trained parameter, fixed code to learned table; Kaplan: the body only), tokens seen, "
               "epochs of the training split (tokens seen / data.train_tokens), training FLOPs C "
               "(flops_per_token × tokens seen) and jobs per cell.")
    return Table("scaling_budgets", caption, ["model size", "budget (tokens)", "N chinchilla", "N kaplan",
                                              "tokens seen", "epochs", "C (FLOPs)", "jobs"], rows, data,
                 numeric={1, 2, 3, 4, 5, 6, 7})


def laws_table(result) -> Table:
    rows, data = [], []
    for (variant, convention), fit in result.laws.items():
        cells, record = [], {"variant": variant, "convention": convention, "n_points": fit.n_points,
                             "sizes": fit.sizes, "budgets": fit.budgets, "seeds": fit.seeds,
                             "converged": fit.converged, "objective": fit.objective, "starts": fit.starts,
                             "distinct_resamples": fit.distinct_resamples, "flags": "; ".join(fit.flags)}
        for name in ("E", "A", "alpha", "B", "beta"):
            lo, hi = fit.ci(name)
            record |= {name: fit.params[name], f"{name}_low": lo, f"{name}_high": hi}
            cells.append(f"{g3(fit.params[name])} [{g3(lo)}, {g3(hi)}]" if fit.fitted else "n/a")
        rows.append([variant, convention, f"{fit.sizes} × {fit.budgets}", str(fit.seeds), *cells,
                     "; ".join(fit.flags) or "none"])
        data.append(record)
    caption = (f"L(N, D) = E + A/N^α + B/D^β fitted to final {METRIC.replace('_', ' ')} per arm (Hoffmann et al. 2022 "
               "approach 3: Huber δ = 1e-3 on log L, L-BFGS from Hoffmann's initialisation grid), N under each "
               "convention, D = tokens seen. Brackets: 95% percentile intervals of a bootstrap over whole seeds. "
               "Flags say when the fit is not to be trusted (see the section's text).")
    return Table("scaling_laws", caption, ["arm", "N convention", "sizes × budgets", "seeds", "E", "A", "α", "B", "β",
                                           "flags"], rows, pd.DataFrame(data), numeric={3, 4, 5, 6, 7, 8})


def gap_fit_table(result) -> Table:
    rows, data = [], []
    for variant, fit in result.gaps.items():
        lo, hi = fit.slope_ci()
        ilo, ihi = sc.interval(fit.boot[:, 0], fit.confidence) if len(fit.boot) else (math.nan, math.nan)
        part = result.pairs[result.pairs["variant"] == variant]
        data.append({"variant": variant, "baseline": result.baseline, "n_pairs": fit.n_pairs, "seeds": fit.seeds,
                     "computes": fit.computes, "intercept": fit.intercept, "intercept_low": ilo, "intercept_high": ihi,
                     "slope_per_decade": fit.slope, "slope_low": lo, "slope_high": hi, "min_compute": fit.min_c,
                     "max_compute": fit.max_c, "distinct_resamples": fit.distinct_resamples,
                     "flags": "; ".join(fit.flags), "runs": ";".join(sorted(set(part["run"]) | set(part["run_base"])))})
        rows.append([f"{variant} − {result.baseline}", str(fit.n_pairs), str(fit.seeds),
                     f"{g3(fit.min_c)} – {g3(fit.max_c)}", f"{signed(fit.slope, 4)} {span(lo, hi, 4)}",
                     "; ".join(fit.flags) or "none"])
    caption = (f"The paired gap (arm minus {result.baseline}, final val bpb, same seed, size and budget) against "
               "training compute: gap = c0 + c1 log10 C by least squares; c1 in bits per byte per decade of compute, "
               "with its 95% interval from a bootstrap over whole seeds.")
    return Table("scaling_gap_fit", caption, ["comparison (a − b)", "pairs", "seeds", "C observed (FLOPs)",
                                              "slope per decade [95%]", "flags"], rows, pd.DataFrame(data),
                 numeric={1, 2, 4})


def _method_label(row) -> str:
    return row.method + (f", N {row.convention}" if row.convention else "")


def predictions_table(result) -> Table:
    p = result.predictions
    rows = []
    for r in p.itertuples():
        measured = (f"{r.measured_wikitext_gap_bpb:+.4f} (WikiText)" if np.isfinite(r.measured_wikitext_gap_bpb)
                    else ("inside seed noise (no number)" if r.target == "earlier" and r.target_ran_arm else "—"))
        rows.append([f"{r.variant} − {r.baseline}", r.target_label, _method_label(r),
                     f"{signed(r.gap)} {span(r.low, r.high)}", f"{r.orders_compute:.1f}",
                     g3(r.orders_params) if np.isfinite(r.orders_params) else "—", f"{r.orders_tokens:.1f}", measured])
    caption = ("The gap (arm minus baseline, bits per byte on our validation text) each fit predicts at the paper's "
               "and the earlier version's point, with its 95% bootstrap interval (over whole seeds), and how far "
               "that extrapolates: orders of magnitude from the largest compute, parameter count (the larger of the "
               "two arms') and token count observed. Measured: the paper's own gap on WikiText (word perplexity "
               "converted to bits per byte), a different text and tokenizer, shown beside the prediction, never in it. "
               "The earlier version's shape beyond its layers, width, MLP and vocabulary is assumed (see the text).")
    return Table("scaling_predictions", caption, ["comparison (a − b)", "at", "fit", "predicted gap [95%]",
                                                  "orders C", "orders N", "orders D", "measured"], rows, p,
                 numeric={3, 4, 5, 6})


def jobs_table(result) -> Table:
    data = result.points.sort_values(["variant", "n_kaplan", "train_budget", "seed"], kind="stable")
    caption = "Every job the fits use, with its run directory (CSV only)."
    return Table("scaling_jobs", caption, list(data.columns), [], data)


# ------------------------------------------------------------------------------------ readings


def _direction(lo: float, hi: float, variant: str, base: str) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval"
    if lo > 0:
        return f"the interval lies above 0 ({variant} predicted worse there)"
    if hi < 0:
        return f"the interval lies below 0 ({variant} predicted better there)"
    return "the interval contains 0: the fit does not tell the sign of the gap there"


# A law's prediction is only read when both arms' laws are identified: a fit at a bound, with E absorbed
# by the power terms, or with an exponent the bootstrap cannot pin down extrapolates its artefact.
UNREADABLE_LAW_FLAGS = ("at a bound", "not identified", "weakly identified")


def unreadable_law(flags: str) -> str | None:
    """The first flag (of a prediction row's `flags`) that keeps a law's prediction out of the readings."""
    for flag in str(flags or "").split("; "):
        if any(marker in flag for marker in UNREADABLE_LAW_FLAGS):
            return flag
    return None


def readings(result) -> list[str]:
    lines = []
    base = result.baseline
    for variant, fit in result.gaps.items():
        lo, hi = fit.slope_ci()
        if not fit.fitted:
            lines.append(f"- **{variant} − {base}**: the gap fit is not available ({'; '.join(fit.flags)}).")
            continue
        if np.isfinite(lo) and hi < 0:
            trend = "the gap decreases with compute within the observed range"
        elif np.isfinite(lo) and lo > 0:
            trend = "the gap increases with compute within the observed range"
        else:
            trend = "the slope's interval contains 0: these runs do not tell whether the gap grows or shrinks with compute"
        lines.append(f"- **{variant} − {base}**, gap vs compute: slope {signed(fit.slope, 4)} bpb per decade of C, "
                     f"95% interval {span(lo, hi, 4)} ({fit.n_pairs} pairs, {fit.seeds} seeds, C from {g3(fit.min_c)} "
                     f"to {g3(fit.max_c)} FLOPs): {trend}.")
    for r in result.predictions.itertuples():
        if not np.isfinite(r.gap):
            continue
        why = None if r.method == "gap vs compute" else unreadable_law(r.flags)
        if why is not None:
            lines.append(f"- {r.variant} − {base} at {r.target_label}: the {_method_label(r)} fit's prediction "
                         f"({signed(r.gap)} bpb, in the table) is not read: {why}.")
            continue
        extra = ("" if r.method == "gap vs compute" else f" and {r.orders_params:.1f} in parameters ({r.convention})")
        measured = (f" The paper measured {r.measured_wikitext_gap_bpb:+.4f} bpb on WikiText (not our validation text)."
                    if np.isfinite(r.measured_wikitext_gap_bpb) else "")
        lines.append(f"- {r.variant} − {base} at {r.target_label}: the {_method_label(r)} fit predicts "
                     f"{signed(r.gap)} bpb {span(r.low, r.high)}, an extrapolation of {r.orders_compute:.1f} orders of "
                     f"magnitude in compute, {r.orders_tokens:.1f} in tokens{extra}; "
                     f"{_direction(r.low, r.high, r.variant, base)}.{measured}")
    return lines


def scaling_tables(result) -> dict[str, Table]:
    return {t.name: t for t in (budgets_table(result), laws_table(result), gap_fit_table(result),
                                predictions_table(result), jobs_table(result))}
