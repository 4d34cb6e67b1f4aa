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
ladder_gap.py   the ladder's paired gap on cell means (random-cell model): compute, size and budget slopes,
                curvature, per-size / per-budget slopes, the allowed reading, labelled extrapolation
trend.py        a linear trend over ordered buckets with its t interval over seeds, curvature, monotonicity
contrasts.py    sizes at a fixed budget, probes at equal input RMS, a gap against a gap, points on a curve
rows.py         one tested quantity (`Tested`) as every new test returns it, and its Holm family
composition.py  a composition study's measures per arm over its pairs of models (t interval), per k, along
                the barrier path
"""
