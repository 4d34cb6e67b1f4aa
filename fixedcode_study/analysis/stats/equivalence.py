"""Equivalence margins, TOST, and the verdict of a comparison.

Default margins (the smallest difference we would call meaningful; override with
``margin=METRIC=VALUE``):
- val_loss, val_loss_select, val_loss_report (nats/token): 0.02. This is a perplexity ratio of
  e^0.02 = 1.020, i.e. the same 2% as the perplexity margin below. The composition measures
  (read/compose.py: an ensemble's gain, a stitch's cost, a barrier) are differences of val losses
  in the same unit and get the same margin.
- bits per byte (val_bpb, *bits_per_byte): 0.01 bits/byte, about 0.02 nats/token at 3 to 4.5
  bytes per token (the tokenizers used here), so consistent with the loss margin.
- perplexities (val_ppl, word/byte/lambada perplexity): 2% relative, tested on the log scale as
  |log ratio| < log(1.02).
- accuracies (acc, acc_norm, exact_match, f1, mc1/mc2): 0.01, one percentage point. The paper's
  learned-vs-fixed gaps are 2-5 points, and one point is about twice the binomial standard error
  of HellaSwag's 10k items.
- anything else: no default; such metrics get better/worse/inconclusive verdicts, never
  "equivalent".
All of these sit well below the gaps the study is about (the paper's learned vs binary16 word
perplexity differs by 12.6%), so "equivalent" means a difference too small to matter for the
question, not "no difference".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ..errors import AnalysisError
from .metrics import in_nats, is_accuracy, lower_is_better, metric_name, on_log_scale
from .core import EXACT, NONE, Comparison, holm

ALPHA = 0.05
BETTER, WORSE, EQUIVALENT, INCONCLUSIVE = "better", "worse", "equivalent", "inconclusive"
# Significant difference AND within the margin: a real but negligible difference.
EQUIVALENT_NONZERO = "equivalent (Δ ≠ 0)"
IDENTICAL = "identical"
NOT_AVAILABLE = "n/a (n<2)"
# The two families of a comparisons table: the study's declared comparisons (read/declared.py), which
# alone get verdicts, and every other row, shown with its raw and adjusted p and never worded.
PRIMARY, EXPLORATORY = "primary", "exploratory"

DEFAULT_LOSS_MARGIN = 0.02
DEFAULT_BPB_MARGIN = 0.01
DEFAULT_RELATIVE_MARGIN = 0.02
DEFAULT_ACCURACY_MARGIN = 0.01


@dataclass(frozen=True)
class Margin:
    value: float          # as given: metric units, or a relative fraction for perplexity-type metrics
    relative: bool        # True: tested on the log scale as log(1 + value)
    source: str = "default"

    @property
    def on_scale(self) -> float:
        """The margin on the scale the metric is tested on."""
        return math.log1p(self.value) if self.relative else self.value

    def label(self) -> str:
        if self.relative:
            return f"±{100 * self.value:g}%"
        return f"±{self.value:g}"


def default_margin(metric: str) -> Margin | None:
    name = metric_name(metric).lower()
    if on_log_scale(metric):
        return Margin(DEFAULT_RELATIVE_MARGIN, True)
    if "bpb" in name or "bits_per_byte" in name:
        return Margin(DEFAULT_BPB_MARGIN, False)
    if in_nats(metric):   # a val loss, or a composition measure: a difference of val losses
        return Margin(DEFAULT_LOSS_MARGIN, False)
    if is_accuracy(metric):
        return Margin(DEFAULT_ACCURACY_MARGIN, False)
    return None


def parse_margin(text: str) -> tuple[str, float]:
    """'val_bpb=0.005' -> ('val_bpb', 0.005); '2%' means 0.02. Raises AnalysisError on bad input."""
    metric, sep, value = text.partition("=")
    metric, value = metric.strip(), value.strip()
    if not sep or not metric or not value:
        raise AnalysisError(f"margin: expects METRIC=VALUE (e.g. val_bpb=0.01, val_ppl=2%), got {text!r}")
    scale = 100.0 if value.endswith("%") else 1.0
    try:
        number = float(value.removesuffix("%")) / scale
    except ValueError as exc:
        raise AnalysisError(f"margin={text}: {value!r} is not a number") from exc
    if not (math.isfinite(number) and number > 0):
        raise AnalysisError(f"margin={text}: the margin must be a positive number")
    return metric, number


class Margins:
    """Default margins plus user overrides. An override names a metric exactly ('hellaswag/acc_norm',
    'val_bpb') or by its part after the task ('acc_norm': every task's acc_norm)."""

    def __init__(self, overrides: dict[str, float] | None = None):
        self.overrides = dict(overrides or {})

    @classmethod
    def from_args(cls, texts: list[str] | None) -> Margins:
        return cls(dict(parse_margin(t) for t in texts or []))

    def for_metric(self, metric: str) -> Margin | None:
        for key in (metric, metric_name(metric)):
            if key in self.overrides:
                return Margin(self.overrides[key], on_log_scale(metric), "margin=")
        return default_margin(metric)

    def unused(self, metrics: set[str]) -> list[str]:
        """Overrides that matched no metric of the table (likely typos)."""
        names = metrics | {metric_name(m) for m in metrics}
        return sorted(k for k in self.overrides if k not in names)


def tost_p(comparison: Comparison, margin: float | None) -> float:
    """Two one-sided tests of H0: |delta| >= margin, on the comparison's own se and dof (paired or
    Welch). p = max of the two one-sided p-values. NaN without a margin or a test."""
    if margin is None or comparison.test == NONE or not math.isfinite(comparison.delta):
        return math.nan
    if comparison.test == EXACT:
        return math.nan
    se, dof = comparison.se, comparison.dof
    p_lower = sps.t.sf((comparison.delta + margin) / se, dof)   # H0: delta <= -margin
    p_upper = sps.t.cdf((comparison.delta - margin) / se, dof)  # H0: delta >= +margin
    return float(max(p_lower, p_upper))


def verdict(comparison: Comparison, metric: str, p_diff: float, p_equiv: float,
            margin: float | None = None, alpha: float = ALPHA) -> str:
    """better / worse / equivalent / inconclusive from (Holm-adjusted) p-values.

    equivalent: TOST rejects |delta| >= margin; if the difference test also rejects delta = 0 the
    difference is real but smaller than the margin ("equivalent (Δ ≠ 0)"). better/worse: the
    difference test rejects delta = 0 and TOST does not establish equivalence. Otherwise
    inconclusive: the data cannot tell a difference from an equivalence at this n.
    """
    if comparison.test == NONE:
        return NOT_AVAILABLE
    direction = _direction(comparison.delta, metric)
    if comparison.test == EXACT:  # no spread on either side: the difference is known exactly
        if comparison.delta == 0:
            return IDENTICAL
        if margin is not None and abs(comparison.delta) < margin:
            return EQUIVALENT_NONZERO
        return direction
    equivalent = math.isfinite(p_equiv) and p_equiv < alpha
    different = math.isfinite(p_diff) and p_diff < alpha
    if equivalent:
        return EQUIVALENT_NONZERO if different else EQUIVALENT
    return direction if different else INCONCLUSIVE


def _direction(delta: float, metric: str) -> str:
    improved = delta < 0 if lower_is_better(metric) else delta > 0
    return BETTER if improved else WORSE


def family_verdicts(table, comparisons: list[Comparison], alpha: float = ALPHA, metric: str | None = None):
    """Add p_holm, tost_p_holm and verdict to `table` (one row per comparison, in order).

    Holm runs within each family of the `family` column (every row primary when there is none), for
    the difference tests and separately for TOST: a primary row's verdict depends on its family alone,
    not on the exploratory rows beside it. Primary rows get verdicts; an exploratory row keeps its raw
    and adjusted p's and reads "exploratory" (never better, worse or equivalent). `metric` names the
    metric of every row where the table has no `metric` column; a NaN `margin` means none."""
    if "family" not in table:
        table["family"] = PRIMARY
    table["p_holm"] = np.nan
    table["tost_p_holm"] = np.nan
    for _, index in table.groupby("family", sort=False).groups.items():
        table.loc[index, "p_holm"] = holm(table.loc[index, "p_value"])
        table.loc[index, "tost_p_holm"] = holm(table.loc[index, "tost_p"])
    table["verdict"] = [
        (verdict(cmp, metric or r.metric, r.p_holm, r.tost_p_holm, None if math.isnan(r.margin) else r.margin, alpha)
         if r.family == PRIMARY else NOT_AVAILABLE if cmp.test == NONE else EXPLORATORY)
        for cmp, r in zip(comparisons, table.itertuples(index=False), strict=True)]
    return table
