"""Tables: statistics -> display tables (Markdown, LaTeX, CSV through render.py).

summary.py (final metrics, parameters, excluded jobs), eval.py (lm-eval, with reference rows),
compare.py (comparisons with verdicts), findings.py (the Findings
sentences, from the verdicts), readings.py (the tested readings' table and sentences), tuned.py, variance.py, code.py (code properties), heads.py (output heads),
probes.py, reference.py (the paper's numbers and chance levels, reference_results.csv), scaling.py
(a compute ladder's fits and predictions) with scaling_points.py (the paper's and earlier version's points),
composition.py (a composition study's measures per arm and per pair) with composition_reading.py (its
question read from the primary rows);
render.py writes a Table, numfmt.py gives every metric one precision.
"""
