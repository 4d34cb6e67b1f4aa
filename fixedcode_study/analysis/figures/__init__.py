"""Figures: matplotlib figures from the frames, the statistics and the tables' orders.

style.py (palette, line styles, sizes), curves.py (validation perplexity and training loss vs
tokens), gap.py (gap vs tokens and vs model size), summary.py (eval bars, sweep axes), tuned.py
(tuning curve), probes.py (probe layer curves, CKA heatmaps, probes over training), scaling.py (the gap
against compute with its fit and the paper's points).
"""
