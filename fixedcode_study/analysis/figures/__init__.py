"""Figures: matplotlib figures. The comparison, gap, downstream, breakdown and scaling figures draw the
estimates results/ computed and recompute none; the curve, sweep-axis and probe figures draw the
per-job values with their mean and range over seeds.

style.py (palette, line styles, sizes), curves.py (validation perplexity and training loss vs
tokens), gap.py (gap vs tokens and vs model size), summary.py (eval bars, sweep axes), tuned.py
(tuning curve), probes.py (probe layer curves, CKA heatmaps, probes over training), scaling.py (the gap
against compute with its fit and the paper's points), primary.py (the primary comparisons as a forest
plot), breakdown.py (a heat map per loss breakdown, the own-code profiles), composition.py (the stitch
cost against the block boundary and the barrier path, per arm over its pairs of models).
"""
