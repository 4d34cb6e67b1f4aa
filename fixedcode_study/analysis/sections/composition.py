"""Composing pairs of models (issue 44): each arm's composition measures over its pairs, the stitch cost at
every block boundary and the barrier path (one figure per question), every pair's own numbers, and the
study's question read from the primary rows (tables/composition_reading.py, a generated block).

Only for reports whose run directories hold compose records of their jobs (results/composition.py):
every other report has no such section, so its files are the same as before the section existed.
"""

from __future__ import annotations

from pathlib import Path

from ..figures.composition import BARRIER, STITCH, barrier_figure, stitch_figure
from ..figures.curves import variant_styles
from ..stats.grouping import shown_context
from ..tables.composition import NAMES, PATH, BY_K, arms_table, by_k_table, pairs_table, path_table
from ..tables.composition_reading import composition_reading
from .base import Part, embed, figure_ref, files, table_block, wrap

TITLE = "Composing pairs of models"
TABLES = NAMES
FIGURES = (STITCH, BARRIER)
READING = "composition"   # the generated block of the reading (analysis/summaries.py rewrites it)
SETTINGS_SHOWN = ("measures", "stitch_tokens", "stitch_batch_size", "stitch_lr", "seed", "precision")


def settings_line(settings: dict | None) -> str:
    if not settings:
        return ""
    def value(v) -> str:
        return ",".join(v) if isinstance(v, list) else "the members'" if v is None else str(v)

    shown = ", ".join(f"{k}={value(v)}" for k, v in settings.items() if k in SETTINGS_SHOWN)
    return f" Every record was computed under one set of settings: {shown} (compose.json `settings`)."


def method_lines(results) -> list[str]:
    composition = results.composition
    n_records, arms = len(composition.pairs), composition.pairs["variant"].nunique()
    return [
        f"{n_records} compose records (`fixedcode compose`, one per pair of models of one arm at two seeds) of "
        f"{arms} arm(s), read from the run directories beside the jobs.{settings_line(composition.data.settings)} "
        "Every loss is the held-out validation the members' own final validation computes (nats per token). "
        "Per pair: the **ensemble gain** is the better member's val loss minus the logit-averaged ensemble's; a "
        "**stitch cost** is the mean over k = 1..n_layer of the stitched model's val loss (blocks 0..k-1 of a, "
        "then b's blocks k.. and head) minus the members' mean, through the identity or a trained affine stitch "
        "(k = 0 feeds a's input to every block of b, which is b itself when the two share one input code, so it is "
        "shown but not in the mean); the **barrier** is the largest excess of the val loss on the straight line "
        "between the two weight sets over the line between the endpoints' losses (11 points, no alignment).", "",
        "An arm's pairs share no model, so its interval is a t interval over them (n − 1 df). Two arms are compared "
        "in the comparisons table, one row per measure: paired over their pairs at the same two seeds when every "
        "member records common random numbers (each member then starts from its counterpart's body and head "
        "weights and sees its batches, and both stitches train on the same batches), else Welch, as runs at one "
        "seed are; the equivalence margin is the val loss's, ±0.02 nats. The rows on the measures the study "
        "declares (`primary: measures:`) are its primary family, Holm over them alone, and the Findings state "
        "them; every other measure (each k's stitch cost, the probability mixture's gain) is exploratory, in "
        f"[`tables/comparisons.csv`](tables/comparisons.csv). {figure_ref(STITCH)} and {figure_ref(BARRIER)} draw "
        f"the per-arm numbers of [`tables/{BY_K}.csv`](tables/{BY_K}.csv) and [`tables/{PATH}.csv`](tables/{PATH}.csv).",
        ""]


def build(results, figures_dir: Path) -> Part:
    composition = results.composition
    if composition is None:
        return Part()
    context = [c for c in shown_context(results.compared.jobs) if c in composition.arms]
    arms, pairs = arms_table(composition.arms, context), pairs_table(composition.pairs, context)
    by_k, path = by_k_table(composition.by_k, context), path_table(composition.path, context)
    part = Part(tables={t.name: t for t in (arms, pairs, by_k, path)})
    styles = variant_styles(results.compared)
    stitch = part.add(stitch_figure(composition.by_k, context, styles, figures_dir))
    barrier = part.add(barrier_figure(composition.path, context, styles, figures_dir))
    lines = [f"## {TITLE}", "", *method_lines(results), *table_block("Each arm's measures", arms, level="###"),
             *embed(stitch), *embed(barrier)]
    reading = composition_reading(results.comparisons)
    if reading:
        lines += ["### The study's question, read from the primary rows", "", *wrap(READING, reading), ""]
    lines += table_block("Every pair", pairs, level="###")
    lines += [f"The figures' numbers: {files(by_k).removeprefix('Files: ')}; {files(path).removeprefix('Files: ')}.", ""]
    part.lines = lines
    return part
