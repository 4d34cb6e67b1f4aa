"""The sections of report.md, in reading order; each builds its tables, figures and text from Results.

summary.py        the first screen: the question, the primary comparisons with verdicts, their figure
findings.py       one sentence per primary row (tables/findings.py), and rows decided in another family
continuum.py      an input continuum's gap against trainable input parameters, and its questions read from rows
composition.py    pairs of models composed (compose records): measures per arm, stitch and barrier figures,
                  the study's question read from the primary rows
adaptation.py     models learning the tokens held out of their pretraining (adapt records): measures per
                  arm and init, the curves figure
readings.py       the tested readings: trends, ends, sizes, probes, sides, curve points (results/readings.py)
design.py         what was compared (sources, arms, seeds) and every caveat
results_tables.py main and downstream results, tuning grid, every comparison row, variance, code
                  properties, output heads, parameters, published references
curves.py         curves and gaps over training tokens and model size, downstream bars, sweep axes
breakdown.py      where the gap lives (loss breakdown heat maps, own-code profiles)
scaling.py        a compute ladder's fits, predictions and readings
probes.py         representation probes; samples.py: generated text
methods.py        excluded jobs and the Methods

Each module has TITLE, TABLES and FIGURES (the stems of the files it may write, so report.py can
remove what an older report left) and build(results, figures_dir) -> base.Part.
"""

from . import (adaptation, breakdown, composition, continuum, curves, design, findings, methods, probes, readings,
               results_tables, samples, scaling, summary)

SECTIONS = (summary, findings, continuum, composition, adaptation, readings, design, results_tables, curves, breakdown, scaling,
            probes, samples, methods)
