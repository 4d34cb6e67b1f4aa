"""The result tables: final metrics, downstream metrics, a tuning grid, every comparison row (primary
and exploratory), matrix x seed variance, code properties, output heads, parameters, and the
published reference numbers (with reference=true). Each is built from the estimates in Results; a
long one goes to its files only (sections/base.py)."""

from __future__ import annotations

from pathlib import Path

from ..tables import summary as tables
from ..tables.code import code_table
from ..tables.compare import comparison_table
from ..tables.eval import eval_table
from ..tables.heads import heads_table
from ..tables.reference import reference_table
from ..tables.tuned import tuned_grid_table
from ..tables.variance import variance_table
from .base import Part, table_block
from .summary import decimals

TITLES = {"main_results": "Main results", "eval_results": "Downstream evaluation",
          "tuned_lr": "Tuning grid (learning rate per arm)", "comparisons": "Comparisons",
          "matrix_seed_variance": "Matrix vs seed variance", "code_properties": "Code properties",
          "output_heads": "Output heads", "params": "Parameter accounting",
          "reference": "Published reference numbers (published, not produced here)"}
TABLES = tuple(TITLES) + ("diff_vs_learned",)   # diff_vs_learned: an earlier version's name, removed when found
FIGURES: tuple[str, ...] = ()


def made_tables(results) -> dict:
    study = results.study
    made = {}
    if results.has_jobs:
        made["main_results"], _ = tables.main_table(study, results.summary)
        evals = eval_table(study, results.summary)
        if evals is not None:
            made["eval_results"] = evals[0]
        if results.tuned_grid is not None:
            made["tuned_lr"] = tuned_grid_table(study, results.tuned_grid)
        lead = ("Tuned arms, each at its chosen setting (see the tuning grid), compared on the held-out half. "
                if results.tuned_grid is not None else "")
        made["comparisons"] = comparison_table(results.compared, results.comparisons, decimals(results), lead=lead)
        made["matrix_seed_variance"] = variance_table(study, results.variance)
        made["code_properties"] = code_table(study)
        made["output_heads"] = heads_table(study)
        made["params"] = tables.params_table(study)
    if results.options.reference:
        made["reference"] = reference_table()
    return {name: table for name, table in made.items() if table is not None}


def build(results, figures_dir: Path) -> Part:
    made = made_tables(results)
    lines = []
    for name, title in TITLES.items():
        if name in made:
            lines += table_block(title, made[name], limit=results.options.inline_rows)
    return Part(lines, made)
