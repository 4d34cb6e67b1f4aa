"""The Scaling section's tables and the laws' readings (issues 25 and 40), from a compute ladder's
estimates (results/scaling.py `Scaling`: the law L(N, D) per arm under both parameter conventions,
the paired gap read on cell means, the predictions at the paper's and the earlier version's (N, D)).
The gap's own readings are tested rows (results/readings.py, tables/readings.py). Every point traces
to a run (tables/scaling_jobs.csv).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import numfmt
from .readings import budget_label
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


def _ladder_rows(ladder) -> list[tuple[str, object]]:
    """(where, row) of one arm's ladder fit, in reading order; the seed-only and bootstrap rows last."""
    return ([("compute", ladder.compute_slope), ("compute", ladder.compute_curvature),
             ("fixed budget", ladder.size_slope), ("fixed size", ladder.budget_slope), ("", ladder.curvature)]
            + [(str(r.get("size")), r) for r in ladder.per_size] + [(budget_label(r.get("budget")), r) for r in ladder.per_budget]
            + [("compute (seed-only: not read)", ladder.seed_only), ("compute (bootstrap: not read)", ladder.bootstrap)])


def gap_fit_table(result) -> Table:
    rows, data = [], []
    for variant, ladder in result.ladders.items():
        part = result.pairs[result.pairs["variant"] == variant]
        runs = ";".join(sorted(set(part["run"]) | set(part["run_base"])))
        for where, r in _ladder_rows(ladder):
            data.append(r.record() | {"variant": variant, "baseline": result.baseline, "where": where,
                                      "n_pairs": len(part), "cells": len(ladder.cells), "seeds": ladder.n_seeds,
                                      "s2_cell": ladder.s2_cell, "s2_seed": ladder.s2_seed, "runs": runs})
            interval = f"{signed(r.estimate, 4)} {span(r.ci_low, r.ci_high, 4)}"
            rows.append([ladder.arm, r.name, where, interval if math.isfinite(r.ci_low) else f"F = {r.estimate:.2f}",
                         numfmt.p_value(r.p_value), numfmt.p_value(r.p_adjusted) if r.family else "—",
                         str(r.family_size) if r.family else "—", r.method])
    caption = (f"The paired gap (arm minus {result.baseline}, final val bpb, same seed, size and budget) over the ladder, "
               "read as the design allows (stats/ladder_gap.py): least squares on the cell means, a t interval with "
               "(cells − parameters) df (the random-cell model: every seed of a cell shares the cell's effect), "
               "regressors log10 C, or log10 N (the body's parameters) and log10 D (tokens) as two factors, centred. "
               "Slopes in bits per byte per decade. Holm p: within the stated family of each row (every fixed arm "
               "together; the CSV names it). The seed-only interval (per-seed slopes, t over seeds) and the two-stage "
               "cluster bootstrap are shown beside it, not read: seeds alone leave out the cell effect.")
    return Table("scaling_gap_fit", caption, ["comparison (a − b)", "row", "at", "estimate [95%]", "p", "Holm p",
                                              "family size", "method"], rows, pd.DataFrame(data),
                 numeric={3, 4, 5, 6})


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
               "and the earlier version's point, with its 95% interval (the cell-mean fits: the fitted mean's t "
               "interval, random-cell model; the laws: a bootstrap over whole seeds), and how far that extrapolates: "
               "orders of magnitude from the largest compute, parameter count (the maximum over the two arms) and "
               "token count observed. Measured: the paper's own gap on WikiText (word perplexity "
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


def law_readings(predictions: pd.DataFrame) -> list[str]:
    """What each law L(N, D) predicts at the paper's points, or why its predictions are not read (one line
    per arm and convention); from the predictions frame, or scaling_predictions.csv read back."""
    lines = []
    laws = predictions[predictions["convention"].fillna("").astype(str) != ""]
    for (variant, convention), part in laws.groupby(["variant", "convention"], sort=False):
        part = part[np.isfinite(part["gap"].astype(float))]
        if part.empty:
            continue
        first = next(part.itertuples())
        why = unreadable_law(first.flags)
        if why is not None:
            at = " and ".join(part["target_label"])
            values = ", ".join(f"{signed(r.gap)}" for r in part.itertuples())
            lines.append(f"- {variant} − {first.baseline}: the {_method_label(first)} fit's predictions at {at} "
                         f"({values} bpb, in the table) are not read: {why}.")
            continue
        for r in part.itertuples():
            measured = (f" The paper measured {r.measured_wikitext_gap_bpb:+.4f} bpb on WikiText (not our validation "
                        "text)." if np.isfinite(r.measured_wikitext_gap_bpb) else "")
            lines.append(f"- {r.variant} − {r.baseline} at {r.target_label}: the {_method_label(r)} fit predicts "
                         f"{signed(r.gap)} bpb {span(r.low, r.high)}, an extrapolation of {r.orders_compute:.1f} orders "
                         f"of magnitude in compute, {r.orders_tokens:.1f} in tokens and {r.orders_params:.1f} in "
                         f"parameters ({r.convention}); {_direction(r.low, r.high, r.variant, r.baseline)}.{measured}")
    return lines


def scaling_tables(result) -> dict[str, Table]:
    return {t.name: t for t in (budgets_table(result), laws_table(result), gap_fit_table(result),
                                predictions_table(result), jobs_table(result))}
