"""Scaling: a compute ladder's law per arm, the gap against compute and the predictions at the paper's
points (results/scaling.py estimates), their tables (tables/scaling.py), readings and figure."""

from __future__ import annotations

from pathlib import Path

from ..figures.scaling import STEM as FIGURE, scaling_figure
from ..tables import scaling as tables_scaling
from ..tables.scaling import readings, scaling_tables
from .base import Part, embed, figure_ref, table_block

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
             f"{seeds} seeds; every point in `tables/scaling_jobs.csv` with its run directory). Two fits, each with "
             f"95% intervals from {result.draws.counts.shape[0] if result.draws is not None else 0} bootstrap "
             "replicates that resample whole seeds (a seed's jobs stay together, and arms share the draws, so "
             "predicted gaps are paired):",
             "- **The law** L(N, D) = E + A/N^α + B/D^β per arm (Hoffmann et al. 2022, approach 3: Huber δ = 1e-3 on "
             "log L, L-BFGS from the best points of Hoffmann's initialisation grid and of each exponent pair, run to "
             "tight tolerances as Besiroglu et al. 2024 ask), with N counted two ways (Pearce & Song 2024: the choice "
             "moves fitted exponents at small scale): *Chinchilla*, every trained parameter (a learned arm's input "
             "table included, a fixed code has none), and *Kaplan*, non-embedding parameters (the body: no input "
             "table, no head). D = tokens seen. Five parameters need at least three sizes and three budgets; the flags "
             "say when a fit is at a bound, outside the grid, flat, or weakly identified.",
             "- **The gap fit**: the paired gap (arm minus baseline, same seed, size and budget) against training "
             "compute C = flops_per_token × tokens seen, gap = c0 + c1 log10 C. A line in log C rather than a power "
             "law, which would need a gap of one sign at every point.",
             "- **Predictions** at the paper's (N, D) (SmolLM2-1.7B shape, V = 49,152, untied head, 1e11 tokens) and "
             "the earlier version's (32 × 1,024, GELU MLP, V = 65,536; its d_ff, heads, context and tokens are "
             f"assumed: {tables_scaling.EARLIER_ASSUMED}), with the extrapolation in orders of magnitude. Beside them, "
             "the paper's measured gap on **WikiText** (lm-eval word perplexity converted to bits per byte with "
             "WikiText-2 test's words per byte), which is not our validation text and not our tokenizer: a "
             "reference, not a test of the fit." + figure, "", *embed(made)]
    lines += ["### Readings", "",
              "Each line says what one fit predicts and no more than its interval allows. The intervals are over "
              "seeds only: they take the fitted form as true out to the target, which nothing here tests, so an "
              "interval that excludes 0 orders of magnitude beyond the data says what the fit implies there, not what "
              "a model at that scale does.", "", *readings(result), ""]
    for name, title in (("scaling_budgets", "Sizes, budgets and epochs"), ("scaling_laws", "The law per arm"),
                        ("scaling_gap_fit", "The gap against compute"), ("scaling_predictions", "Predictions")):
        lines += table_block(title, part.tables[name], level="###")
    part.lines = lines
    return part
