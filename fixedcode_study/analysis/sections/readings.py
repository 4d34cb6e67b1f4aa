"""Tested readings: the trend, bucket-end, probe, side and curve-point rows of results/readings.py, one
sentence per stated row in the words its test allows (tables/readings.py), every row in
tables/readings.csv. A ladder's rows (size contrasts, its fits, extrapolations) are read in the
Scaling section."""

from __future__ import annotations

from pathlib import Path

from ..stats.equivalence import ALPHA
from ..tables.readings import (BESIDE, EXPLORATORY, EXTRAPOLATION, LADDER, NAME, SIZE, STATED, WRITERS, reading_lines,
                              readings_table)
from .base import Part, files, wrap

TITLE = "Tested readings"
TABLES = (NAME,)
FIGURES: tuple[str, ...] = ()
LADDER_KINDS = (SIZE, LADDER, EXTRAPOLATION)   # read in the Scaling section
HERE = tuple(k for k in WRITERS if k not in LADDER_KINDS)


def build(results, figures_dir: Path) -> Part:
    frame = results.readings
    if frame is None or frame.empty:
        return Part()
    table = readings_table(frame)
    here = frame[frame["kind"].isin(HERE)]
    stated = int((here["role"] == STATED).sum())
    exploratory = int((here["role"] == EXPLORATORY).sum())
    lines = [f"## {TITLE}", "",
             "A reading that goes beyond one arm-against-arm row (a trend over buckets, one bucket against the others, "
             "a gap at two model sizes, two arms' probes, one gap against another, a point of a gap curve) rests on a "
             "row of its own. Rows built from the declared comparisons, or by a rule stated in full (probes: every pair "
             "of arms at equal input RMS, at the layer the head reads; sides: each fixed code's untied gap against each "
             "table-free head's), are *stated*: one Holm family per kind, named below with its size, and a direction "
             f"only where the Holm p is below α = {ALPHA}, equivalence only where the TOST Holm p is; otherwise the "
             "reading is *not shown*, never an absence. Rows built from exploratory comparisons are exploratory: in "
             "the CSV with raw and Holm p, never worded. Method per row: `method` in the CSV; docs/statistics.md.", ""]
    if stated:
        lines += [*wrap("readings", reading_lines(frame, HERE)), ""]
    else:
        lines += ["- No stated reading row applies to this study.", ""]
    counts = [f"{stated} stated"] + ([f"{exploratory} exploratory"] if exploratory else [])
    beside = int((frame["role"] == BESIDE).sum())
    lines += [f"Rows here: {', '.join(counts)}; with the Scaling section's, every row ({len(frame)}"
              + (f", {beside} beside" if beside else "") + f") is in the table. {files(table)}", ""]
    return Part(lines, tables={NAME: table})
