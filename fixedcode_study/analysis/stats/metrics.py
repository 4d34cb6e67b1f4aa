"""What a metric name means for the statistics: its better direction and the scale it is tested on.

Metric names are results.json final keys (val_bpb, val_loss_report, ...), lm-eval keys written
``task/metric`` (hellaswag/acc_norm, wikitext/word_perplexity), or the composition measures of a
pair of models (ensemble_gain, stitch_cost_affine_k2, barrier: read/compose.py), named by what they
are: a gain is better up, a cost or a barrier down, all in nats per token; or the adaptation
measures of a model learning held-out tokens (adapt_heldout_loss, ...: read/adapt.py), all down.
"""

from __future__ import annotations

import math

from ..read.adapt import is_measure as is_adapt_measure
from ..read.compose import higher_is_better as composition_higher_is_better, is_measure as is_composition_measure

# Fragments for which smaller is better; everything else (acc, acc_norm, f1, exact_match, ...)
# is treated as higher-is-better.
LOWER_IS_BETTER = ("ppl", "perplexity", "bpb", "bits_per_byte", "loss")
# Perplexities are exponentials of a mean log-loss: their spread grows with their level and a
# difference means a ratio, so they are tested as log values (a difference of logs is a log ratio).
LOG_SCALE = ("ppl", "perplexity")


def metric_name(metric: str) -> str:
    """The part after the task: 'hellaswag/acc_norm' -> 'acc_norm'; 'val_bpb' -> 'val_bpb'."""
    return metric.rpartition("/")[2].partition(",")[0]


def lower_is_better(metric: str) -> bool:
    if is_adapt_measure(metric):   # losses, and the mass new head rows take before any update (read/adapt.py)
        return True
    if is_composition_measure(metric):
        return not composition_higher_is_better(metric)
    return any(fragment in metric.lower() for fragment in LOWER_IS_BETTER)


def in_nats(metric: str) -> bool:
    """A loss-type number in nats per token: a val loss, or a composition measure (a difference of val losses)."""
    return "loss" in metric_name(metric).lower() or is_composition_measure(metric)


def on_log_scale(metric: str) -> bool:
    name = metric_name(metric).lower()
    return any(fragment in name for fragment in LOG_SCALE)


def to_scale(values, metric: str):
    """Values as tested: log for perplexity-type metrics (non-positive values become NaN), else as is."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    if not on_log_scale(metric):
        return values
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)


def is_accuracy(metric: str) -> bool:
    name = metric_name(metric).lower()
    return name.startswith(("acc", "exact_match", "f1", "mc1", "mc2"))


def percent_change(log_ratio: float) -> float:
    """A difference of logs as a relative change: 0.0653 -> +6.75 (%)."""
    return 100.0 * math.expm1(log_ratio)
