"""Scaling: a compute ladder's law per arm, the gap read on cell means (its size contrasts, slopes and
curvature) and the predictions at the paper's points (results/scaling.py, results/readings.py), their
tables (tables/scaling.py), readings (tables/readings.py) and figure."""

from __future__ import annotations

from pathlib import Path

from ..figures.scaling import STEM as FIGURE, scaling_figure
from ..tables import scaling as tables_scaling
from ..tables.readings import reading_lines
from ..tables.scaling import law_readings, scaling_tables
from .base import Part, embed, figure_ref, table_block, wrap
from .readings import LADDER_KINDS

TITLE = "Scaling"
TABLES = tables_scaling.NAMES
FIGURES = (FIGURE,)


def build(results, figures_dir: Path) -> Part:
    """A compute ladder's scaling fits; nothing for any other study."""
    result = results.scaling
    if result is None:
        return Part()
    part = Part(tables=scaling_tables(result))
    made = part.add(scaling_figure(result, figures_dir))
    figure = f" {figure_ref(FIGURE)} plots the gap against compute." if made is not None else ""
    seeds = result.draws.counts.shape[1] if result.draws is not None else 0
    lines = ["## Scaling", "",
             f"Final val bpb of every arm run at several model sizes and token budgets ({len(result.points)} jobs, "
             f"{seeds} seeds; every point in `tables/scaling_jobs.csv` with its run directory):",
             "- **The gap, read as the design allows.** The paired gap (arm minus baseline, same seed, size and budget) "
             "has a cell effect that every seed of a cell shares, so every fit is least squares on the cell means with "
             "a t interval on (cells − parameters) df (the random-cell model, stats/ladder_gap.py): its slope per "
             "decade of compute C = flops_per_token × tokens seen, with a squared log C term for curvature; log N "
             "(the body's parameters) and log D (tokens) as two factors, with their curvature jointly; a line per size "
             "over budget and per budget over size. Beside them, not read: the seed-only interval and a two-stage "
             "cluster bootstrap. Each kind of row is one Holm family over every fixed arm. A size contrast is the gap "
             "at one model size minus at another (the bigger model first) at one budget, for every pair of sizes and "
             "every budget, Welch over seeds (two sizes share a seed's data order, not its initialisation), Holm over "
             "all of them.",
             "- **The law** L(N, D) = E + A/N^α + B/D^β per arm (Hoffmann et al. 2022, approach 3: Huber δ = 1e-3 on "
             "log L, L-BFGS from the best points of Hoffmann's initialisation grid and of each exponent pair, run to "
             "tight tolerances as Besiroglu et al. 2024 ask), with N counted two ways (Pearce & Song 2024: the choice "
             "moves fitted exponents at small scale): *Chinchilla*, every trained parameter (a learned arm's input "
             "table included, a fixed code has none), and *Kaplan*, non-embedding parameters (the body: no input "
             "table, no head). D = tokens seen. 95% intervals from "
             f"{result.draws.counts.shape[0] if result.draws is not None else 0} bootstrap replicates that resample "
             "whole seeds. Five parameters need at least three sizes and three budgets; the flags say when a fit is "
             "at a bound, outside the grid, flat, or weakly identified.",
             "- **Predictions** at the paper's (N, D) (SmolLM2-1.7B shape, V = 49,152, untied head, 1e11 tokens) and "
             "the earlier version's (32 × 1,024, GELU MLP, V = 65,536; its d_ff, heads, context and tokens are "
             f"assumed: {tables_scaling.EARLIER_ASSUMED}), each labelled an extrapolation with its distance in orders "
             "of magnitude. Beside them, the paper's measured gap on **WikiText** (lm-eval word perplexity converted "
             "to bits per byte with WikiText-2 test's words per byte), which is not our validation text and not our "
             "tokenizer: a reference, not a test of the fit." + figure, "", *embed(made)]
    lines += ["### Readings", "",
              "Each line is one tested row (or, for a kind with many rows, one line per comparison listing the "
              "cells under each reading; every number in `tables/readings.csv` and `tables/scaling_gap_fit.csv`), in "
              "the words its Holm-adjusted test allows. An extrapolation's interval takes the fitted form as true out "
              "to the target, which nothing here tests: an interval that excludes 0 orders of magnitude beyond the "
              "data says what the fit implies there, not what a model at that scale does.", "",
              *wrap("scaling-readings", reading_lines(results.readings, LADDER_KINDS)
                   + law_readings(result.predictions)), ""]
    for name, title in (("scaling_budgets", "Sizes, budgets and epochs"), ("scaling_laws", "The law per arm"),
                        ("scaling_gap_fit", "The gap on cell means"), ("scaling_predictions", "Predictions")):
        # the gap fit's rows and the predictions are read above, each in its sentence: linked, not inlined
        read = name in ("scaling_gap_fit", "scaling_predictions")
        lines += table_block(title, part.tables[name], level="###", limit=0 if read else 30)
    part.lines = lines
    return part
