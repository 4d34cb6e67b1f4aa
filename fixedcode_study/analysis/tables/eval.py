"""The downstream (lm-eval) table, with the paper's numbers, chance levels and outside models evaluated
here (read/external.py) as marked reference rows."""

from __future__ import annotations

import pandas as pd

from . import numfmt
from ..stats.grouping import metric_title, shown_context
from .reference import eval_references
from .render import Table
from .summary import metric_decimals, summary_metrics, summary_table

REFERENCE_MARK = "reference, not produced here"
EXTERNAL_MARK = "reference, evaluated here (outside model)"


def external_rows(study, table: Table, metrics: list[str], decimals: dict[str, int], width: int) -> None:
    """One italic row per outside model (value ± lm-eval stderr), appended to `table` and its data."""
    ext = study.externals
    if ext is None or ext.empty:
        return
    ext = ext[ext["metric"].isin(metrics)]
    for name, group in ext.groupby("label", sort=True):
        by_metric = group.set_index("metric")
        cells = [numfmt.mean_cell(by_metric.at[m, "value"], float("nan"), 1, by_metric.at[m, "stderr"],
                                  decimals.get(m, 3)) if m in by_metric.index else "—" for m in metrics]
        table.rows.append(["reference"] * width + [f"*{name}*"] + cells)
    table.caption += (" Rows marked external are outside models (a Hugging Face folder or Hub name, at the "
                      "revision shown) evaluated here with lm-eval's own hf model on the same tasks: value ± lm-eval "
                      "stderr, one model, never used in a statistic.")
    table.data = pd.concat([table.data, ext.assign(provenance=EXTERNAL_MARK, variant=ext["label"])],
                           ignore_index=True)


def externals_only_table(study) -> tuple[Table, dict[str, int]] | None:
    """The downstream table when only outside models were evaluated (no trained run has lm-eval numbers)."""
    ext = study.externals
    if ext is None or ext.empty:
        return None
    metrics = sorted(ext.loc[ext["headline"].astype(bool), "metric"].unique())
    decimals = metric_decimals(ext.assign(mean=ext["value"], std=float("nan"), n=1))
    columns = ["input variant"] + [metric_title(m) for m in metrics]
    table = Table("eval_results", "Downstream (lm-eval) metrics: no trained run of this study was evaluated.",
                  columns, [], pd.DataFrame(), set(), set(range(1, len(columns))))
    external_rows(study, table, metrics, decimals, 0)
    return table, decimals


def eval_table(study, summary: pd.DataFrame) -> tuple[Table, dict[str, int]] | None:
    """`summary`: the report's seed summaries (results.Results.summary); its lm-eval metrics are shown."""
    metrics = summary_metrics(summary, evals=True) if len(summary) else []
    if not metrics:
        return externals_only_table(study)
    table, decimals, _ = summary_table(study, summary, "eval_results", "Downstream (lm-eval) metrics", metrics)
    table.data = table.data.assign(provenance="this study")
    shown = shown_context(study.jobs)
    external_rows(study, table, metrics, decimals, len(shown))
    refs = eval_references(metrics)
    if refs.empty:
        return table, decimals
    for label, group in refs.groupby("label", sort=False):
        by_metric = group.set_index("metric")["cell"]
        table.rows.append(["reference"] * len(shown) + [f"*{label}*"] + [by_metric.get(m, "—") for m in metrics])
    table.caption += (" Rows in italics are reference values, not produced here and never used in a statistic: the "
                      "paper's own results (its 1.7B models, so another scale than these runs) and chance levels of "
                      "the multiple-choice tasks; ≈ marks approximate values (see analysis/reference_results.csv).")
    table.data = pd.concat([table.data,
                            refs.assign(provenance=REFERENCE_MARK, variant=refs["label"])], ignore_index=True)
    return table, decimals
