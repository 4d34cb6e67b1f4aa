"""The downstream (lm-eval) table, with the paper's numbers and chance levels as marked reference rows."""

from __future__ import annotations

import pandas as pd

from analysis.grouping import metric_order, shown_context, table_points
from analysis.reference import eval_references
from analysis.render import Table
from analysis.tables import summary_table

REFERENCE_MARK = "reference, not produced here"


def eval_table(study) -> tuple[Table, dict[str, int]] | None:
    points = table_points(study)
    points = points[points["kind"] == "eval"]
    if points.empty:
        return None
    table, decimals, _ = summary_table(study, points, "eval_results", "Downstream (lm-eval) metrics")
    metrics = metric_order(points)
    refs = eval_references(metrics)
    if refs.empty:
        return table, decimals
    shown = shown_context(study.jobs)
    for label, group in refs.groupby("label", sort=False):
        by_metric = group.set_index("metric")["cell"]
        table.rows.append(["reference"] * len(shown) + [f"*{label}*"] + [by_metric.get(m, "—") for m in metrics])
    table.caption += (" Rows in italics are reference values, not produced here and never used in a statistic: the "
                      "paper's own results (its 1.7B models, so another scale than these runs) and chance levels of "
                      "the multiple-choice tasks; ≈ marks approximate values (see analysis/reference_results.csv).")
    table.data = pd.concat([table.data.assign(provenance="this study"),
                            refs.assign(provenance=REFERENCE_MARK, variant=refs["label"])], ignore_index=True)
    return table, decimals
