"""The Findings section and seeds needed of an existing comparisons.csv, without the run directories.

For re-reading committed reports (docs/reports/*/tables/comparisons.csv) after the Findings and
seeds-needed columns were added (issue 24): the same findings_lines() report.md uses, with the
seeds recomputed from the CSV's own rows (delta, se, n_pairs, margin; Holm families = its rows)
when the CSV predates them. Decimals per metric come from main_results.csv beside it when it has
the metric (as the report does), else 3.

    python benchmarks/findings_from_table.py docs/reports/main/tables/comparisons.csv [more.csv ...]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, not an installed copy

from fixedcode_study.analysis.stats.equivalence import ALPHA
from fixedcode_study.analysis.stats.power import seeds_columns
from fixedcode_study.analysis.tables.findings import findings_lines
from fixedcode_study.analysis.tables.summary import metric_decimals


def decimals_beside(csv: Path) -> dict[str, int]:
    """Per-metric decimals as the report's tables have them, from main_results.csv next to the table."""
    main = csv.with_name("main_results.csv")
    return metric_decimals(pd.read_csv(main)) if main.exists() else {}


def _n(value) -> str:
    return f"{round(value):,}" if math.isfinite(value) else ("—" if math.isinf(value) else "n/a")


def seeds_lines(diffs: pd.DataFrame) -> list[str]:
    """A Markdown table of the seeds needed for every row (not only inconclusive ones)."""
    if "seeds_for_difference" not in diffs:
        diffs = pd.concat([diffs, seeds_columns(diffs, ALPHA)], axis=1)
    alpha_d, alpha_e = diffs["seeds_alpha_difference"].iloc[0], diffs["seeds_alpha_equivalence"].iloc[0]
    header = (f"| comparison | verdict | pairs | sd of differences | Δ ≠ 0 at α/m = {alpha_d:.4g} | at α = {ALPHA:g} "
              f"| equivalence at α/m = {alpha_e:.4g} | at α = {ALPHA:g} | why none |")
    lines = [header, "| :--- | :--- | ---: | ---: | ---: | ---: | ---: | ---: | :--- |"]
    for r in diffs.itertuples(index=False):
        notes = "; ".join(str(n) for n in {r.seeds_for_difference_note, r.seeds_for_equivalence_note}
                          if isinstance(n, str) and n)
        lines.append(f"| {r.comparison} | {r.verdict} | {r.n_pairs} | {r.sd_diff:.4f} | {_n(r.seeds_for_difference)} "
                     f"| {_n(r.seeds_for_difference_unadjusted)} | {_n(r.seeds_for_equivalence)} "
                     f"| {_n(r.seeds_for_equivalence_unadjusted)} | {notes} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", type=Path, help="comparisons.csv files")
    args = parser.parse_args(argv)
    if missing := [str(csv) for csv in args.tables if not csv.is_file()]:
        parser.error(f"no such file: {', '.join(missing)} (give a report's tables/comparisons.csv)")
    for csv in args.tables:
        diffs = pd.read_csv(csv)
        print(f"<!-- {csv} -->\n## Findings\n")
        print("\n".join(findings_lines(diffs, decimals_beside(csv))))
        print("\n### Seeds needed (80% power, every row)\n")
        print("\n".join(seeds_lines(diffs)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
