"""The input continuum table: the numbers the continuum figure draws, one row per (context, arm).

Each arm's token-specific and shared trainable input parameters and its comparison row against the
baseline (results/continuum.py: the report's own row, copied), with the verdict where the row is
primary; the baseline itself is a row at Δ = 0 by definition. The CSV is the frame itself, so it can
be read back (analysis/summaries.py rewrites the continuum reading from it and comparisons.csv).
"""

from __future__ import annotations

import math

import pandas as pd

from ..stats.equivalence import PRIMARY
from ..stats.grouping import metric_title
from . import numfmt
from .compare import delta_cells
from .render import Table

NAME = "input_continuum"
DEFAULT_DECIMALS = 3


def decimals_of(row) -> int:
    value = getattr(row, "decimals", math.nan)
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else DEFAULT_DECIMALS


def _cells(row) -> list[str]:
    """n, Δ, CI, family, Holm p's, verdict of one row (the baseline's: Δ = 0 by definition, no test)."""
    if row.reference:
        return ["", "0 (reference)", "", "", "", "", ""]
    delta, ci = delta_cells(row, decimals_of(row))
    primary = row.family == PRIMARY
    return [str(row.n), delta, ci, str(row.family), numfmt.p_value(float(row.p_holm)),
            numfmt.p_value(float(row.tost_p_holm)), str(row.verdict) if primary else "—"]


def continuum_table(frame: pd.DataFrame, context: list[str], baseline: str) -> Table:
    """`frame`: results/continuum.py's rows; `context`: the context columns shown (those that vary)."""
    metric = frame["metric"].dropna().iloc[0]
    columns = [*context, "arm", "token-specific", "shared", "n", f"Δ {metric_title(metric)} (arm − {baseline})",
               "95% CI", "family", "Holm p", "TOST Holm p", "verdict"]
    cells = [[*(str(getattr(r, c)) for c in context), str(r.variant), numfmt.integer(r.token_specific),
              numfmt.integer(r.shared), *_cells(r)] for r in frame.itertuples(index=False)]
    caption = (f"Each arm's trainable input parameters, split into token-specific (one row per token ID) and shared "
               f"(a map every token goes through), and its comparison row against {baseline} on "
               f"{metric_title(metric)}: Δ = arm − {baseline} with the 95% CI of its own test (paired over seeds with "
               "common random numbers, else Welch), the Holm p's within its family (of Δ = 0 and of the TOST at the "
               "equivalence margin); a verdict only where the row is "
               f"primary. The rows are the comparisons table's, copied; {baseline} itself is at Δ = 0 by definition. "
               "These are the numbers the continuum figure draws.")
    first = len(context) + 1
    return Table(NAME, caption, columns, cells, frame.reset_index(drop=True),
                 numeric={first, first + 1, first + 2, first + 3, first + 4, first + 6, first + 7})
