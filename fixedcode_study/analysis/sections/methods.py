"""Excluded jobs and the Methods: every job left out with its reason, and every rule the report uses."""

from __future__ import annotations

from pathlib import Path

from ..stats.breakdown import METHOD as BUCKET_METHOD, MIN_TOKENS
from ..stats.core import CONFIDENCE
from ..stats.equivalence import (
    ALPHA,
    DEFAULT_ACCURACY_MARGIN,
    DEFAULT_BPB_MARGIN,
    DEFAULT_LOSS_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
)
from ..stats.power import POWER
from ..tables import summary as tables
from ..tables.render import to_markdown
from .base import Part

TITLE = "Methods"
TABLES = ("excluded_jobs", "jobs")   # jobs.csv: report.py writes it (one row per job: every number traced)
FIGURES: tuple[str, ...] = ()

METHODS = f"""\
- **Cells** are mean ± sample standard deviation (ddof = 1) over seeds, with the number of seeds n.
  With a single seed the ± is lm-eval's own standard error (marked "stderr"); with neither, the value alone.
- **Best** per column (bold) is judged at the displayed precision, within each model preset; lower is better
  for perplexity, bits per byte and loss, higher for everything else (accuracy-type lm-eval metrics).
- **What is compared.** Within one model preset (and data set), every variant against the baseline
  (`baseline=`, default learned), the two fixed codes against each other (gf2 − binary16) whenever both ran,
  any pair named with `pairs=a:b`, and the study's declared primary comparisons. Δ is always a − b. The validation metric tested is val bpb (val ppl
  is not tested separately: on one validation set log ppl and bpb are proportional, so it would repeat the
  same test); downstream metrics are lm-eval's headline metrics of the suite. Perplexities are tested on the
  log scale, so their Δ is a ratio, shown as the % change of the geometric mean.
- **Pairing.** When two runs of different variants share a seed and both record common random numbers
  (results.json `init.scheme` = per_group_generators: the same body/head initialisation and the same data order
  for every variant at that seed), they form a pair, and seed-to-seed noise cancels in their difference. With at
  least two pairs the comparison is a paired t-test on the per-seed differences (`scipy.stats.ttest_rel`), with
  a t interval on n − 1 degrees of freedom. Otherwise, with at least two runs per side, it is Welch's t-test
  (`scipy.stats.ttest_ind(equal_var=False)`) with a Welch–Satterthwaite t interval; the table says why it was
  not paired. With fewer runs nothing is tested ("n/a"): one seed says nothing about seed-to-seed variation, and
  lm-eval's stderr (sampling over benchmark items) is not a substitute for it.
- **Effect sizes.** Besides Δ and its {CONFIDENCE:.0%} CI: d_z (mean difference / sd of the differences) for
  paired comparisons, Hedges' g (difference / pooled sd, small-sample corrected) otherwise; their CIs invert the
  noncentral t distribution. With three seeds these intervals are wide, which is the honest answer.
- **Families.** A study declares the comparisons it was run for (sweeps/<study>.yaml `primary:`, or `study=
  FILE.yaml`, or `primary=A:B` on the command): those rows, on the tested validation metric in every comparison
  context, are the *primary* family. Every other row (other pairs, downstream metrics) is *exploratory*.
- **Multiplicity.** The tests of Δ = 0 of the primary family are adjusted with Holm–Bonferroni (step-down, statsmodels'
  `multipletests`; controls the family-wise error rate at α = {ALPHA}), their TOST p-values as a second family.
  The exploratory rows are Holm-adjusted among themselves the same way, and shown with raw and adjusted p only:
  they get no verdict and no finding, whatever their p. A primary verdict depends on its family alone, so the same
  comparison on the same jobs gets the same verdict whatever else the report compares.
- **Equivalence (TOST).** For each metric a margin says how small a difference is too small to matter. Two
  one-sided t-tests (same se and degrees of freedom as the test above) check Δ > −margin and Δ < +margin; the
  TOST p-value is the larger of the two. Default margins: val bpb ±{DEFAULT_BPB_MARGIN} bits/byte; val loss
  (incl. select/report halves) ±{DEFAULT_LOSS_MARGIN} nats/token (a perplexity ratio of 1.02); perplexities ±{100 * DEFAULT_RELATIVE_MARGIN:g}%
  relative (|log ratio| < log 1.02); accuracies ±{DEFAULT_ACCURACY_MARGIN} (one percentage point). The three
  loss-type margins describe the same ~2% change in perplexity at 3–4.5 bytes per token; one point of accuracy
  is about two binomial standard errors on HellaSwag and well below the paper's 2–5 point gaps. Other metrics have
  no default margin. Change any with `margin=METRIC=VALUE` (e.g. `margin=val_bpb=0.005`,
  `margin=hellaswag/acc_norm=0.02`, `margin=acc_norm=0.02` for every task; for perplexities VALUE is
  relative: `0.03` or `3%`).
- **Verdict** (primary rows; α = {ALPHA}, on the Holm-adjusted p-values): *equivalent* when TOST shows |Δ| < margin (written
  "equivalent (Δ ≠ 0)" when the difference test is also significant: a real but negligible difference);
  *better* / *worse* when the difference test is significant and equivalence is not shown, in the metric's
  direction; *inconclusive* when neither test is significant: these runs can tell neither a difference nor an
  equivalence, so more seeds are needed. A CI that contains 0 is not by itself evidence of no difference, so
  it never earns a verdict of its own.
- **Findings** are written by the analysis from the verdicts, one sentence per primary comparison row, in words
  its verdict allows (an inconclusive row is never called better, worse or equivalent), with the numbers it rests
  on. An exploratory row is never a finding.
- **Seeds needed** (inconclusive paired primary rows): the number of seed pairs for {POWER:.0%} power, taking the observed Δ
  and sd of the paired differences as the truth: to show Δ ≠ 0 with the two-sided paired t-test (noncentral t, as
  statsmodels' `TTestPower`), and to show equivalence within the margin by TOST (exact power under normality by
  numerical integration over the sd). Each is solved at α/m, m the size of the primary Holm family, which
  Holm rejects whatever the other rows do; the CSV also has the numbers at α alone. None when no n can (Δ = 0,
  |Δ| ≥ margin) or the row is not paired. With three seeds the sd is itself uncertain, so these are orders of magnitude.
"""
TUNED = """\
- **Tuned arms** (studies where runs differ in optim.lr or warm-up): per arm, the learning rate with the lowest
  mean final val_loss_select over seeds is chosen, and the arms are compared, with everything above, on the
  other half of the validation windows: val_bpb_report when recorded, else val_loss_report (one of them only, as
  they are proportional). The halves share
  the trained models, so a lucky seed at one learning rate helps both halves: disjoint windows remove the data
  part of the selection optimism, not the training-noise part.
"""
VARIANCE = """\
- **Matrix vs seed variance** (GF(2) matrix seeds crossed with run seeds): a two-way random-effects model
  y = μ + matrix + seed + residual, estimated by ANOVA mean squares (σ²_matrix = (MS_matrix − MS_residual)/J,
  σ²_seed = (MS_seed − MS_residual)/I, σ²_residual = MS_residual, negative estimates set to 0), with F tests of
  "no matrix effect" / "no seed effect" and 95% intervals: exact chi-square for σ²_residual, generalized confidence
  intervals (chi-square pivots of the mean squares; Hamada & Weerahandi 2000) for σ²_matrix, σ²_seed and the
  shares. Simulated under this model at 5 × 3 and 10 × 3 they cover 95–97% (at least 94% over 30 grid sizes and
  variance settings). The residual holds the matrix × seed interaction, which one run per cell cannot
  separate from noise.
"""
BREAKDOWN = f"""\
- **Loss breakdown** (exploratory): buckets that hold the same tokens in every run are compared like the
  headline when they hold at least `min_bucket_tokens=` (default {MIN_TOKENS:,}) tokens; Benjamini–Hochberg
  ({BUCKET_METHOD}, statsmodels) controls the false discovery rate over every tested bucket of the report,
  the difference tests and the TOST tests separately. No bucket gets a verdict; the weight under the arm's own
  code is a per-arm profile (its buckets hold other tokens for each code), never a gap.
"""
READINGS = f"""\
- **Tested readings** (results/readings.py; docs/statistics.md): on each primary comparison's paired gap per
  seed, a trend over each ordered breakdown (the per-seed least-squares slope over the tested buckets, weighted by
  their tokens, t over seeds, with its curvature and the adjacent steps against it, Holm over the steps) and its
  first and last tested bucket against the others' token-weighted mean (TOST at the val-loss margin); the val bpb
  gap at the first, middle and last validation its runs share and its change over the last two, paired by seed;
  probe contrasts at equal input RMS (5% relative tolerance, Welch over seeds); the input side against the output
  side (a paired linear contrast); on a ladder, the gap at two model sizes at one budget (Welch) and the cell-mean
  fits. Each kind is one Holm family; a direction is read only where its Holm p < α = {ALPHA}, equivalence only
  where its TOST Holm p is; otherwise "not shown". Rows from exploratory comparisons are exploratory.
"""
CLOSING = """\
- **Figures** draw the estimates the report computed once (the comparison rows, seed summaries, gap curves,
  bucket rows, fits); none recomputes a statistic. Report files are written atomically, as the record's are.
- Only jobs with status "completed" and finite final val_ppl and val_bpb enter tables and figures; every other
  job is listed under *Excluded jobs*. Every table value traces to run directories via the `runs` column of
  the CSV next to it (tables/*.csv) and `tables/jobs.csv` (one row per job). Reference rows (the paper, chance
  levels) are shown for orientation only and never enter a statistic.
"""


def methods(results) -> str:
    """The Methods: the rules every report uses, then those of the estimates this report has."""
    parts = [METHODS]
    parts += [TUNED] if results.tuned_grid is not None else []
    parts += [VARIANCE] if not results.variance.empty else []
    parts += [BREAKDOWN] if not (results.buckets.empty and results.profiles.empty) else []
    parts += [READINGS] if results.readings is not None and not results.readings.empty else []
    return "".join(parts + [CLOSING])


def build(results, figures_dir: Path) -> Part:
    excluded = tables.excluded_table(results.study)
    lines = ["## Excluded jobs", "",
             to_markdown(excluded) if excluded.rows else "None: every job found is completed with final metrics.", "",
             f"## {TITLE}", "", methods(results)]
    return Part(lines, {"excluded_jobs": excluded})
