"""The trend test over ordered buckets (issue 40, point 1): a planted slope is found and covered, no
slope is found at about the nominal rate, the slope equals numpy's polyfit per seed, and a profile
that is not monotone is not read as one that grows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.stats.rows import in_family
from fixedcode_study.analysis.stats.trend import DECREASES, INCREASES, NOT_MONOTONE, bucket_trend
from fixedcode_study.analysis.stats.rows import NOT_SHOWN

RNG_SEED = 4040


def synthetic(rng, slope: float, seeds: int = 3, buckets: int = 8, noise: float = 0.03, level: float = 0.3,
              profile=None) -> pd.DataFrame:
    """gap_sb = level + slope * b (+ a fixed profile) + N(0, noise^2), tokens per bucket fixed."""
    shape = np.zeros(buckets) if profile is None else np.asarray(profile, dtype=float)
    b = np.tile(np.arange(buckets), seeds)
    return pd.DataFrame({"seed": np.repeat(np.arange(1, seeds + 1), buckets), "bucket": b,
                         "gap": level + slope * b + shape[b] + rng.normal(0, noise, b.size),
                         "tokens": 100 * (b + 1), "weight_mid": 2.0 * b + 1})


def test_a_planted_slope_is_found_and_its_interval_covers_the_truth():
    rng = np.random.default_rng(RNG_SEED)
    trend = bucket_trend(synthetic(rng, 0.04, seeds=5))
    assert trend.slope.ci_low > 0 and trend.slope.ci_low <= 0.04 <= trend.slope.ci_high
    assert trend.slope.p_value < 0.001 and trend.slope.n == 5 and trend.slope.dof == 4
    assert trend.reading() == INCREASES and trend.monotone
    down = bucket_trend(synthetic(rng, -0.04, seeds=5))
    assert down.reading() == DECREASES


def test_the_slope_is_each_seeds_polyfit_then_a_t_interval_over_seeds():
    rng = np.random.default_rng(RNG_SEED + 1)
    frame = synthetic(rng, 0.01, seeds=4)
    for weight in (None, "tokens"):
        trend = bucket_trend(frame, position="weight_mid", weight=weight)
        per_seed = []
        for _, part in frame.groupby("seed"):
            w = None if weight is None else np.sqrt(part["tokens"].to_numpy())   # polyfit weights are 1/sigma
            per_seed.append(np.polyfit(part["weight_mid"], part["gap"], 1, w=w)[0])
        ref = sps.ttest_1samp(per_seed, 0.0)
        assert trend.slope.estimate == pytest.approx(np.mean(per_seed), rel=1e-10)
        assert trend.slope.p_value == pytest.approx(ref.pvalue, rel=1e-8)
        low, high = ref.confidence_interval(0.95)
        assert (trend.slope.ci_low, trend.slope.ci_high) == pytest.approx((low, high), rel=1e-8)
        assert trend.weighted is (weight is not None)
        assert ("weighted by tokens" in trend.slope.method) is (weight is not None)


def test_without_a_slope_it_finds_one_at_about_the_nominal_rate():
    """Over 400 seeded null replicates at 3 seeds the slope CI excludes 0 in 5% of them: the count must
    lie within the central 99.9% of Binomial(400, 0.05), i.e. [7, 36]."""
    rng = np.random.default_rng(RNG_SEED + 2)
    reps = 400
    hits = sum(bucket_trend(synthetic(rng, 0.0), weight="tokens").slope.p_value < 0.05 for _ in range(reps))
    low, high = sps.binom.ppf([0.0005, 0.9995], reps, 0.05)
    assert low <= hits <= high, hits


def test_the_planted_slope_is_covered_at_about_the_nominal_rate():
    rng = np.random.default_rng(RNG_SEED + 3)
    reps = 300
    hits = 0
    for _ in range(reps):
        s = bucket_trend(synthetic(rng, 0.02)).slope
        hits += s.ci_low <= 0.02 <= s.ci_high
    low, high = sps.binom.ppf([0.0005, 0.9995], reps, 0.95)
    assert low <= hits <= high, hits


def test_a_profile_that_rises_on_average_but_not_monotonically_is_not_read_as_growing():
    """Shaped like the issue's code-weight profile: up overall, with steps down (4->5, 8->11)."""
    rng = np.random.default_rng(RNG_SEED + 4)
    profile = [0.10, 0.15, 0.22, 0.27, 0.25, 0.35, 0.45, 0.56, 0.31]
    frame = synthetic(rng, 0.0, seeds=3, buckets=len(profile), noise=0.005, level=0.0, profile=profile)
    trend = bucket_trend(frame)
    assert trend.slope.ci_low > 0
    assert not trend.monotone and trend.steps_against == 2
    assert trend.steps_shown_against >= 1          # the drop 0.56 -> 0.31 is far beyond the noise
    assert trend.reading() == NOT_MONOTONE
    assert trend.curvature.tested


def test_a_curved_profile_shows_curvature_and_a_line_does_not():
    rng = np.random.default_rng(RNG_SEED + 5)
    bowl = [(b - 3.5) ** 2 * 0.02 for b in range(8)]
    curved = bucket_trend(synthetic(rng, 0.0, seeds=4, noise=0.005, profile=bowl))
    assert curved.curvature.ci_low > 0 and curved.curvature.p_value < 0.01
    straight = bucket_trend(synthetic(rng, 0.03, seeds=4, noise=0.001))
    assert straight.curvature.ci_low < 0 < straight.curvature.ci_high


def test_a_slope_in_a_family_is_read_on_its_holm_adjusted_p():
    rng = np.random.default_rng(RNG_SEED + 6)
    weak = bucket_trend(synthetic(rng, 0.004, seeds=3, noise=0.004))
    assert weak.slope.p_value < 0.05
    others = [bucket_trend(synthetic(rng, 0.0)).slope for _ in range(9)]
    family = in_family([weak.slope, *others], "code weight x 10 arms")
    adjusted = weak.with_slope(family[0])
    assert family[0].family_size == 10 and family[0].p_adjusted >= weak.slope.p_value
    if family[0].p_adjusted >= 0.05:
        assert adjusted.reading() == NOT_SHOWN


def test_buckets_missing_from_a_seed_are_left_out_and_bad_input_names_the_field():
    rng = np.random.default_rng(RNG_SEED + 7)
    frame = synthetic(rng, 0.02)
    partial = frame[~((frame["seed"] == 2) & (frame["bucket"] == 7))]
    trend = bucket_trend(partial)
    assert trend.dropped == (7,) and trend.buckets == tuple(range(7))
    with pytest.raises(AnalysisError, match="lacks column"):
        bucket_trend(frame.drop(columns="gap"))
    with pytest.raises(AnalysisError, match="appears twice"):
        bucket_trend(pd.concat([frame, frame.head(1)]))
    varying = frame.assign(tokens=frame["tokens"] + frame["seed"])
    with pytest.raises(AnalysisError, match="'tokens' must be one value per bucket"):
        bucket_trend(varying, weight="tokens")
