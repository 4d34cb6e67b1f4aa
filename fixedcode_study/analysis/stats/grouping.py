"""What gets compared with what: comparison contexts, metric order and display names.

Rows are only compared within a context: the same model preset, and the same data set when
more than one data set is present (perplexities on different data are not comparable).
"""

from __future__ import annotations

import pandas as pd

from ..read.compose import is_measure as is_composition_measure, measure_title
from ..read.adapt import is_measure as is_adapt_measure, measure_title as adapt_title
from .metrics import lower_is_better

FINAL_METRICS = ["val_ppl", "val_bpb"]
# The validation metric that is tested. Not val ppl as well: on one validation set log ppl and bpb
# are proportional, so a second test would repeat the first and count twice in the Holm family.
COMPARED_FINAL = ["val_bpb"]
DISPLAY = {"val_ppl": "val ppl", "val_bpb": "val bpb", "val_loss": "val loss",
           "val_loss_select": "val loss (select half)", "val_loss_report": "val loss (report half)",
           "val_bpb_select": "val bpb (select half)", "val_bpb_report": "val bpb (report half)"}


def context_columns(jobs: pd.DataFrame) -> list[str]:
    included = jobs[jobs["included"]]
    return (["data"] if included["data"].nunique(dropna=False) > 1 else []) + ["model"]


def context_mask(frame: pd.DataFrame, context: list[str], key: tuple) -> pd.Series:
    """Rows of ``frame`` that belong to the context ``key`` (values in ``context`` order)."""
    mask = pd.Series(True, index=frame.index)
    for column, value in zip(context, key, strict=True):
        mask &= frame[column] == value
    return mask


def shown_context(jobs: pd.DataFrame) -> list[str]:
    """Context columns worth a table column: only those that take more than one value."""
    included = jobs[jobs["included"]]
    return [c for c in context_columns(jobs) if included[c].nunique(dropna=False) > 1]


def model_rank(jobs: pd.DataFrame) -> dict:
    """Models ordered by size (mean total parameters), so tables read small -> large."""
    included = jobs[jobs["included"]]
    if "params.total" not in included:
        return {m: i for i, m in enumerate(sorted(included["model"].astype(str).unique()))}
    by = ["params.total"] + (["train_budget"] if "train_budget" in included else [])  # a ladder: size, then budget
    sizes = included.groupby("model", dropna=False)[by].mean().sort_values(by, kind="stable")
    return {m: i for i, m in enumerate(sizes.index)}


def sort_rows(frame: pd.DataFrame, jobs: pd.DataFrame, extra: list[str] = ()) -> pd.DataFrame:
    """Data set, then model size, then variant order (learned first), then ``extra`` keys."""
    rank = model_rank(jobs)
    keys = [c for c in ("data",) if c in frame] + ["_model_rank", "variant_order", *extra]
    return (frame.assign(_model_rank=frame["model"].map(rank))
            .sort_values(keys, kind="stable").drop(columns="_model_rank"))


def metric_order(points: pd.DataFrame, finals: list[str] = FINAL_METRICS) -> list[str]:
    present = list(dict.fromkeys(points["metric"]))
    evals = sorted(points.loc[points["kind"] == "eval", "metric"].unique())
    return [m for m in finals if m in present] + evals


def metric_title(metric: str) -> str:
    shown = measure_title(metric) if is_composition_measure(metric) else \
        adapt_title(metric) if is_adapt_measure(metric) else DISPLAY.get(metric, metric)
    return f"{shown} {'↓' if lower_is_better(metric) else '↑'}"


def table_points(study) -> pd.DataFrame:
    """Final and eval values of included jobs: the numbers every table is built from."""
    long = study.long
    points = long[long["included"].astype(bool) & long["kind"].isin(["final", "eval"])]
    points = points[points["metric"].isin(FINAL_METRICS) | (points["kind"] == "eval")]
    order = study.jobs.set_index("run")["variant_order"]
    return points.assign(variant_order=points["run"].map(order))


def comparison_points(study, finals: list[str] = COMPARED_FINAL) -> pd.DataFrame:
    """What the comparisons test: the given final metrics and lm-eval's headline metrics, one row per run."""
    long = study.long
    points = long[long["included"].astype(bool)]
    headline = points["headline"].fillna(True).astype(bool) if "headline" in points else True
    points = points[((points["kind"] == "final") & points["metric"].isin(finals))
                    | ((points["kind"] == "eval") & headline)]
    order = study.jobs.set_index("run")["variant_order"]
    return points.assign(variant_order=points["run"].map(order))
