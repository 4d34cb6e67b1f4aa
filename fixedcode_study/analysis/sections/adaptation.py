"""New tokens after training (issue 44): each arm's models adapting to the tokens held out of their
pretraining, per init of a learned table's new rows: a table of the measures, the curves figure.

Only for reports whose run directories hold adapt records of their jobs (read/adapt.py): every other
report has no such section, so its files are the same as before the section existed. The comparisons
on the measures are rows of the comparisons table (and, where the study declares them, its primary
family and Findings); the study's question is read from those primary rows alone
(tables/adaptation_reading.py, a generated block).
"""

from __future__ import annotations

from pathlib import Path

from ..figures.adaptation import CURVES as CURVES_FIGURE, curves_figure
from ..figures.curves import variant_styles
from ..read.adapt import REFERENCE_INIT
from ..stats.grouping import shown_context
from ..tables.adaptation import CURVES, NAMES, arm_frame, arms_table, curve_frame, curves_table
from ..tables.adaptation_reading import adaptation_reading
from .base import Part, embed, files, figure_ref, table_block, wrap

TITLE = "Learning new tokens after training"
TABLES = NAMES
FIGURES = (CURVES_FIGURE,)
READING = "adaptation"   # the generated block of the reading (analysis/summaries.py rewrites it)


def method_lines(results) -> list[str]:
    data = results.adaptation
    settings = data.settings or {}
    shown = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in settings.items()
                      if k in ("tokens", "batch_size", "lr", "val_points", "val_tokens", "inits", "head_init", "seed"))
    return [
        f"{len(data.files)} adapt records (`fixedcode adapt`, one per job) read from the run directories beside the "
        f"jobs, every one computed under one set of settings: {shown} (adapt.json `settings`). Each job was pretrained "
        "with its study's held-out share of the merged tokens absent (each occurrence spelled with the tokens its merge "
        "joined: the same text), then adapted on the original tokens: every parameter trains (AdamW, constant lr, no "
        "weight decay, gradient norm clipped at 1, fp32) on the same batches for every init. A learned table's new rows "
        "start by each init (random at init std; the mean of the other rows; the mean of the rows of the token's parts), "
        "a fixed code's as they are; the head's new rows start from one seeded draw in every arm. The measures are "
        "read over the original held-out windows at step 0 and at log-spaced steps (nats per token). The comparisons "
        f"table holds each arm against each other on each measure at the end of adaptation (learned read at its "
        f"`{REFERENCE_INIT}` init; the mass on the held-out set at step 0; and each loss's change from step 0, which "
        f"leaves out the gap the arms bring from pretraining), paired over seeds when the arms record "
        f"common random numbers; {figure_ref(CURVES_FIGURE)} draws the curves.", ""]


def build(results, figures_dir: Path) -> Part:
    data = results.adaptation
    if data is None:
        return Part()
    context = [c for c in shown_context(results.compared.jobs) if c in data.runs]
    arms = arms_table(arm_frame(data.runs, context), context)
    frame = curve_frame(data.curves, context)
    curves = curves_table(frame, context)
    part = Part(tables={t.name: t for t in (arms, curves)})
    figure = part.add(curves_figure(frame, context, variant_styles(results.compared), figures_dir))
    lines = [f"## {TITLE}", "", *method_lines(results), *table_block("Each arm and init", arms, level="###"),
             *embed(figure), f"The figure's numbers: {files(curves).removeprefix('Files: ')}.", ""]
    reading = adaptation_reading(results.comparisons)
    if reading:
        lines += ["### The study's question, read from the primary rows", "", *wrap(READING, reading), ""]
    part.lines = lines
    return part
