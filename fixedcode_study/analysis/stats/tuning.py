"""Tuned arms: pick each input's best learning rate on one metric, report it on another.

A study is a tuning study when the jobs of one input ran with more than one optim.lr (or
optim.warmup_*) — detected from the resolved configs, no flag needed. Each arm (an input variant
without its tuning settings) then has a grid of settings; per (context, arm) the setting with
the lowest mean over seeds of the final ``val_loss_select`` is chosen, and the arms are compared
on ``val_bpb_report`` when recorded, else ``val_loss_report`` (both are shown). The training side computes the
two on disjoint halves of the validation windows, so the reported number is not the one that was
minimised. The halves share the trained models, though: a seed that happens to do well at one
learning rate does well on both halves, so some selection optimism remains (see Methods).
Records without the select/report split fall back to selecting and reporting on val_loss, and
the report says so.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from .grouping import context_columns
from ..read.variants import TUNED_PREFIXES, format_value

SELECT = "val_loss_select"
REPORT = ["val_bpb_report", "val_loss_report"]   # the first present is tested
FALLBACK = "val_loss"
FALLBACK_NOTE = ("tuning study without val_loss_select / val_loss_report in the records: the learning rate is "
                 "selected and reported on the same validation loss, which is optimistic for every arm")


def tuned_columns(study) -> list[str]:
    return list(dict.fromkeys(c for cols in study.label_props.values() for c in cols if c.startswith(TUNED_PREFIXES)))


def is_tuned(study) -> bool:
    return bool(tuned_columns(study))


def metrics_used(study) -> tuple[str, list[str], list[str]]:
    """(selection metric, report metrics shown, notes), falling back when the split is not recorded.
    The first report metric is the one tested (tested_metric)."""
    present = set(study.long.loc[study.long["kind"] == "final", "metric"])
    report = [m for m in REPORT if m in present]
    if SELECT in present and report:
        return SELECT, report, []
    return FALLBACK, ["val_bpb"] if "val_bpb" in present else [FALLBACK], [FALLBACK_NOTE]


def tested_metric(report: list[str]) -> list[str]:
    """The one report metric the comparisons test: bits per byte when recorded, as in the main
    comparisons. Not both: on one set of windows loss and bpb are proportional, so a second test
    would repeat the first and count twice in the Holm family."""
    return report[:1]


def setting_text(row: pd.Series, columns: list[str]) -> str:
    parts = [f"{c.rpartition('.')[2]}={format_value(row[c])}" for c in columns if c in row and pd.notna(row[c])]
    return ", ".join(parts) or "default"


def grid(study) -> tuple[pd.DataFrame, list[str]]:
    """One row per (context, arm, setting): seeds, mean/std of the selection and report metrics, chosen."""
    select, report, notes = metrics_used(study)
    context = context_columns(study.jobs)
    jobs = study.included_jobs
    tuned = tuned_columns(study)
    finals = study.long[(study.long["kind"] == "final") & study.long["run"].isin(jobs["run"])]
    wide = finals.pivot_table(index="run", columns="metric", values="value", aggfunc="first")
    per_run = jobs.set_index("run")[context + ["arm", "variant", "variant_order", *tuned]].join(wide, how="left")
    rows = []
    for key, group in per_run.groupby(context + ["arm", "variant"], sort=False, dropna=False):
        row = dict(zip(context + ["arm", "variant"], key, strict=True))
        row |= {"setting": setting_text(group.iloc[0], tuned), "variant_order": group["variant_order"].iloc[0],
                "n": len(group), "runs": ";".join(sorted(group.index))}
        row |= {c: group[c].iloc[0] for c in tuned}
        for metric in [select, *report]:
            values = group[metric].dropna() if metric in group else pd.Series(dtype=float)
            row |= {f"{metric}|mean": values.mean(), f"{metric}|std": values.std(ddof=1), f"{metric}|n": len(values)}
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table, notes
    table["chosen"] = False
    score = table[f"{select}|mean"]
    for _, group in table.groupby(context + ["arm"], sort=False, dropna=False):
        valid = score.loc[group.index].dropna()
        if not valid.empty:
            table.loc[valid.idxmin(), "chosen"] = True
    table.attrs.update(select=select, report=report)
    return table.sort_values("variant_order", kind="stable"), notes


def selected_study(study, table: pd.DataFrame):
    """The study restricted to each arm's chosen setting, so the ordinary comparisons, curves and gap
    figures run on best-vs-best. Variant labels keep the setting ("gf2 (lr=0.003)"); names such as
    baseline=learned still resolve through the input name."""
    runs = {r for runs in table.loc[table["chosen"], "runs"] for r in runs.split(";")}
    return dataclasses.replace(study, jobs=study.jobs[study.jobs["run"].isin(runs)].copy(),
                               long=study.long[study.long["run"].isin(runs)].copy())
