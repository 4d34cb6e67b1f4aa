"""Statistics over the frames that read/ produces; nothing here draws or formats.

core.py         seed summaries, paired and Welch t, effect sizes, Holm and BH (statsmodels)
pairing.py      which runs pair (seed + common random numbers) and hence which test applies
equivalence.py  margins, TOST, the families' Holm adjustment and the verdict of a comparison
comparisons.py  which arms are compared with which, primary (declared) or exploratory
power.py        seed pairs for 80% power: paired t and TOST sample sizes
variance.py     GF(2) matrix vs run-seed variance components; tuning.py: best learning rate per arm
metrics.py      a metric's better direction and test scale; grouping.py: comparison contexts
breakdown.py    the loss per bucket on a common partition (BH over the report), shares; own-code profiles
scaling.py      L(N, D) per arm (Chinchilla approach 3), the paired gap against compute, seed bootstrap
"""
