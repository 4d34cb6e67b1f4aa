"""Known answers for the probing measures (fixedcode_study/probing/measures.py) and the linear
probes (linear.py): pure numpy / scikit-learn on small seeded data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import cosine_similarity

from fixedcode_study.probing import linear, measures


def gaussian(n: int, d: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def code_bits(ids: np.ndarray, width: int = 16) -> np.ndarray:
    """(N, width) binary16-style code: bit b of each id."""
    return (ids[:, None] >> np.arange(width)) & 1


# ------------------------------------------------------------------------------ similarity measures

def test_identical_inputs_are_perfectly_similar():
    x = gaussian(200, 16, 0)
    assert measures.linear_cka(x, x) == pytest.approx(1.0, abs=1e-10)
    assert measures.knn_overlap(x, x, k=10) == 1.0
    assert measures.rsa(x, x) == pytest.approx(1.0, abs=1e-12)


def test_knn_overlap_is_exactly_one_with_tied_neighbours():
    # duplicated rows and a zero row: many exact ties, which the stable sort must break identically
    x = np.repeat(gaussian(20, 4, 1), 3, axis=0)
    x[5] = 0.0
    assert measures.knn_overlap(x, x.copy(), k=4) == 1.0


def test_cka_invariant_to_rotation_isotropic_scale_and_translation():
    x = gaussian(300, 12, 2)
    q = ortho_group.rvs(12, random_state=3)
    y = 3.7 * x @ q + np.arange(12.0) * 5.0          # rotate, scale, translate
    assert measures.linear_cka(x, y) == pytest.approx(1.0, abs=1e-10)
    assert measures.linear_cka(x, x + 100.0) == pytest.approx(1.0, abs=1e-10)
    # ... but not to anisotropic scaling: the measure is not trivially 1
    stretched = x * np.r_[10.0, np.ones(11)]
    assert measures.linear_cka(x, stretched) < 0.9


def test_cka_against_kernel_form_with_different_widths():
    # the feature-space formula equals HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)) with linear kernels
    x, y = gaussian(60, 5, 4), gaussian(60, 9, 5)
    y[:, :3] += 2 * x[:, :3]
    h = np.eye(60) - 1 / 60
    k, l_ = h @ x @ x.T @ h, h @ y @ y.T @ h
    expected = (k * l_).sum() / np.sqrt((k * k).sum() * (l_ * l_).sum())
    assert measures.linear_cka(x, y) == pytest.approx(expected, rel=1e-10)
    assert 0.2 < expected < 0.9


def test_knn_overlap_known_answer():
    # two tight pairs of directions; y swaps the partners, so no nearest neighbour is shared
    # (a row counted as its own neighbour would make this 1)
    def at(degrees):
        a = np.radians(degrees)
        return np.c_[np.cos(a), np.sin(a)]
    x, y = at([0, 10, 100, 110]), at([0, 100, 10, 110])
    assert measures.knn_overlap(x, y, k=1) == 0.0
    # k=2: x gives 0:{1,2} 1:{0,2} 2:{3,1} 3:{2,1}; y gives 0:{2,1} 1:{3,2} 2:{0,1} 3:{1,2}
    assert measures.knn_overlap(x, y, k=2) == (2 + 1 + 1 + 2) / 8


def test_unrelated_features_are_dissimilar():
    n, k = 2000, 10
    x, y = gaussian(n, 32, 6), gaussian(n, 32, 7)
    assert measures.linear_cka(x, y) < 0.05
    assert measures.knn_overlap(x, y, k=k) < 4 * k / n   # chance ~ k/N = 0.005
    assert abs(measures.rsa(x, y)) < 0.05


def test_cka_of_a_constant_representation_is_nan():
    x = gaussian(50, 4, 8)
    assert np.isnan(measures.linear_cka(x, np.full((50, 3), 0.1)))
    assert np.isnan(measures.linear_cka(np.zeros((50, 2)), x))


def test_cosine_matrix_matches_sklearn_and_zero_rows_give_zero():
    x = gaussian(30, 6, 9)
    x[4] = 0.0
    c = measures.cosine_matrix(x)
    assert c.shape == (30, 30)
    np.testing.assert_allclose(c, cosine_similarity(x), atol=1e-12)
    assert np.all(c[4] == 0.0) and np.all(c[:, 4] == 0.0)


def test_rsa_is_a_rank_correlation():
    # a monotone distortion of the cosines cannot change a rank correlation; shuffling rows of one side can
    x = gaussian(40, 8, 10)
    assert measures.rsa(x, 2.0 * x) == pytest.approx(1.0, abs=1e-12)
    shuffled = x[np.random.default_rng(11).permutation(40)]
    assert measures.rsa(x, shuffled) < 0.3


def test_mismatched_rows_raise_naming_the_argument():
    x, y = gaussian(10, 3, 12), gaussian(9, 3, 13)
    for fn in (measures.linear_cka, measures.rsa, measures.knn_overlap):
        with pytest.raises(ValueError, match=r"y has 9 rows but x has 10"):
            fn(x, y) if fn is not measures.knn_overlap else fn(x, y, k=3)
    with pytest.raises(ValueError, match="ids has 9 entries but states has 10"):
        measures.type_vectors(x, np.arange(9), np.arange(3))
    with pytest.raises(ValueError, match="train_y has 9 rows but train_x has 10"):
        linear.probe(x, np.arange(9) % 2, x, np.arange(10) % 2)
    with pytest.raises(ValueError, match="test_bits has 9 rows but test_x has 10"):
        linear.probe_bits(x, np.zeros((10, 2), int), x, np.zeros((9, 2), int))


def test_knn_overlap_validates_k():
    x = gaussian(10, 3, 14)
    with pytest.raises(ValueError, match="k must be"):
        measures.knn_overlap(x, x, k=10)
    with pytest.raises(ValueError, match="k must be"):
        measures.knn_overlap(x, x, k=0)
    assert measures.knn_overlap(x, x, k=9) == 1.0   # k = N - 1: every other row, trivially shared


# --------------------------------------------------------------------------------------- geometry

@pytest.mark.parametrize("r", [1, 3, 7])
def test_effective_rank_of_r_equal_orthogonal_directions(r):
    n, d = 500, 24
    # r orthonormal, centered columns (QR of centered Gaussians) placed along r orthonormal directions
    z, _ = np.linalg.qr(gaussian(n, r, 15) - gaussian(n, r, 15).mean(axis=0))
    basis = ortho_group.rvs(d, random_state=16)[:r]  # (r, d)
    x = 4.0 * z @ basis + 7.0                         # an offset the centering must remove
    assert measures.effective_rank(x) == pytest.approx(r, abs=1e-6)


def test_effective_rank_of_isotropic_gaussian_is_near_full():
    assert 15.0 < measures.effective_rank(gaussian(4000, 16, 17)) <= 16.0
    assert np.isnan(measures.effective_rank(np.ones((10, 4))))


def test_anisotropy_offset_cloud_vs_centered_isotropic():
    x = gaussian(1000, 32, 18)
    assert abs(measures.anisotropy(x, pairs=2000, seed=0)) < 0.05
    assert measures.anisotropy(x + 20.0, pairs=2000, seed=0) > 0.95


def test_anisotropy_uses_all_pairs_exactly_when_few():
    x = gaussian(6, 3, 19)                            # 15 pairs <= 2000: exact
    c = cosine_similarity(x)
    expected = c[np.triu_indices(6, k=1)].mean()
    assert measures.anisotropy(x, pairs=2000, seed=5) == pytest.approx(expected, abs=1e-12)
    # sampled: reproducible with the seed, different draws with another seed, both near the exact mean
    y = gaussian(300, 3, 20) + 0.5
    a, b, c2 = (measures.anisotropy(y, pairs=500, seed=s) for s in (1, 1, 2))
    assert a == b and a != c2
    exact = measures.anisotropy(y, pairs=300 * 299 // 2)
    assert abs(a - exact) < 0.08


def test_anisotropy_never_pairs_a_row_with_itself():
    # three unit vectors 120 degrees apart: every pair of distinct rows has cosine -1/2, a row with
    # itself +1; 3 pairs > pairs=2 takes the sampling path, whose mean must still be exactly -1/2
    angles = np.array([0.0, 2.0, 4.0]) * np.pi / 3
    x = np.c_[np.cos(angles), np.sin(angles)]
    for seed in range(5):
        assert measures.anisotropy(x, pairs=2, seed=seed) == pytest.approx(-0.5, abs=1e-12)


# ----------------------------------------------------------------------------------- type vectors

def slow_type_vectors(states, ids, types):
    means = np.full((len(types), states.shape[1]), np.nan)
    counts = np.zeros(len(types), dtype=np.int64)
    for t, tok in enumerate(types):
        rows = states[ids == tok]
        counts[t] = len(rows)
        if len(rows):
            means[t] = rows.mean(axis=0)
    return means, counts


def test_type_vectors_match_a_slow_loop():
    rng = np.random.default_rng(21)
    states = rng.standard_normal((3000, 8)).astype(np.float32)
    ids = rng.integers(0, 100, size=3000)
    types = np.array([5, 99, 0, 42, 1000, 17])        # unsorted; 1000 never occurs
    means, counts = measures.type_vectors(states, ids, types)
    ref_means, ref_counts = slow_type_vectors(states.astype(np.float64), ids, types)
    np.testing.assert_array_equal(counts, ref_counts)
    assert counts[4] == 0 and np.isnan(means[4]).all()
    np.testing.assert_allclose(means, ref_means, rtol=1e-12, atol=1e-12)
    assert means.dtype == np.float64


def test_type_vector_sums_stream_any_split():
    rng = np.random.default_rng(22)
    states = rng.standard_normal((1000, 5))
    ids = rng.integers(0, 30, size=1000)
    types = np.arange(0, 40, 2)                       # 32..38 never occur, odd ids are ignored
    ref_means, ref_counts = slow_type_vectors(states, ids, types)
    for cuts in ([], [0, 0, 1, 999], sorted(rng.choice(1000, size=7, replace=False))):
        acc = measures.TypeVectorSums(types, 5)
        for part_states, part_ids in zip(np.split(states, cuts), np.split(ids, cuts)):
            acc.add(part_states, part_ids)
        np.testing.assert_array_equal(acc.counts, ref_counts)
        np.testing.assert_allclose(acc.means(), ref_means, rtol=1e-12, atol=1e-12)


def test_type_vectors_reject_bad_types():
    with pytest.raises(ValueError, match="repeated"):
        measures.type_vectors(np.zeros((4, 2)), np.arange(4), np.array([1, 1]))
    with pytest.raises(ValueError, match=r"states must be \(N, 3\)"):
        measures.TypeVectorSums(np.arange(3), 3).add(np.zeros((4, 2)), np.arange(4))


# ----------------------------------------------------------------------------------- linear probes

@pytest.mark.parametrize("method", linear.METHODS)
def test_bit_probes_recover_a_tiled_binary_code(method):
    rng = np.random.default_rng(23)
    ids = rng.integers(0, 4096, size=2400)            # < 2^12: bits 12..15 are always 0
    bits = code_bits(ids)
    features = np.tile(bits, 8).astype(np.float32)    # (N, 128), as the fixed-code input layer gives
    train, test = slice(0, 1800), slice(1800, None)
    out = linear.probe_bits(features[train], bits[train], features[test], bits[test], method=method)
    assert out["constant_bits"] == [12, 13, 14, 15]
    assert out["per_bit"][12:] == [None] * 4
    assert out["per_bit"][:12] == [1.0] * 12
    assert out["mean_accuracy"] == 1.0 and out["min_accuracy"] == 1.0
    assert out["n_test"] == 600 and out["n_train"] == 1800
    assert 0.45 < out["majority_mean"] < 0.56           # balanced random bits


@pytest.mark.parametrize("method", linear.METHODS)
def test_bit_probes_on_noise_stay_near_chance(method):
    rng = np.random.default_rng(24)
    bits = code_bits(rng.integers(0, 8, size=1200), width=3)
    noise = rng.standard_normal((1200, 16))
    out = linear.probe_bits(noise[:900], bits[:900], noise[900:], bits[900:], method=method)
    assert out["constant_bits"] == []
    assert out["mean_accuracy"] < 0.6


@pytest.mark.parametrize("method", linear.METHODS)
def test_identity_probe_separable_vs_noise(method):
    rng = np.random.default_rng(25)
    n, classes = 3000, 50
    # skewed labels so that the majority baseline is well above 1/50
    p = 1.0 / np.arange(1, classes + 1)
    y = rng.choice(classes, size=n, p=p / p.sum())
    onehot = np.eye(classes)[y] + 0.05 * rng.standard_normal((n, classes))
    features = np.hstack([onehot, rng.standard_normal((n, 14))])  # one-hot-like plus noise columns
    train, test = slice(0, 2000), slice(2000, None)
    res = linear.probe(features[train], y[train], features[test], y[test], method=method)
    assert res.accuracy == 1.0 and res.ci_high == 1.0 and res.ci_low > 0.99
    assert res.n_train == 2000 and res.n_test == 1000
    assert res.n_classes == len(np.unique(y[train]))
    assert res.majority == pytest.approx(np.mean(y[test] == 0))   # label 0 is the most frequent
    noise = rng.standard_normal((n, 64))
    res_noise = linear.probe(noise[train], y[train], noise[test], y[test], method=method)
    assert res_noise.accuracy < res_noise.majority + 0.05
    assert res_noise.ci_low <= res_noise.accuracy <= res_noise.ci_high
    assert set(res.to_dict()) >= {"accuracy", "ci_low", "ci_high", "n_train", "n_test", "n_classes",
                                  "majority", "converged"}


def test_unseen_test_labels_count_as_errors():
    rng = np.random.default_rng(26)
    y_train = rng.integers(0, 3, size=300)
    y_test = np.r_[rng.integers(0, 3, size=90), np.full(10, 3)]   # label 3 never seen in training
    x_train, x_test = np.eye(4)[y_train] * 5, np.eye(4)[y_test] * 5
    res = linear.probe(x_train, y_train, x_test, y_test)
    assert res.n_unseen == 10 and res.n_test == 100 and res.n_classes == 3
    assert res.accuracy == pytest.approx(0.9)


def test_single_training_class_is_the_constant_predictor():
    x = gaussian(40, 3, 27)
    res = linear.probe(x[:20], np.full(20, 7), x[20:], np.r_[np.full(15, 7), np.full(5, 2)])
    assert res.n_classes == 1 and res.converged
    assert res.accuracy == pytest.approx(0.75) and res.majority == pytest.approx(0.75)


def test_convergence_is_recorded_not_warned():
    rng = np.random.default_rng(28)
    x, y = rng.standard_normal((400, 20)), rng.integers(0, 5, size=400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = linear.probe(x[:300], y[:300], x[300:], y[300:], max_iter=1, method="logistic")
        full = linear.probe(x[:300], y[:300], x[300:], y[300:], max_iter=500, method="logistic")
    assert not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    assert short.converged is False and full.converged is True


def test_lda_probe_matches_scikit_learns_lda_without_ridge():
    """With ridge 0 the closed-form probe is textbook LDA: sklearn's own gives the same predictions."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    rng = np.random.default_rng(29)
    y = rng.integers(0, 12, size=1500)
    x = rng.standard_normal((1500, 10)) @ rng.standard_normal((10, 10)) + 0.8 * rng.standard_normal((12, 10))[y]
    ours, _ = linear._fit_predict(x[:1000], y[:1000], x[1000:], max_iter=0, C=1.0, seed=0, method="lda", ridge=0.0)
    theirs = LinearDiscriminantAnalysis(solver="lsqr").fit(x[:1000], y[:1000]).predict(x[1000:])
    assert (ours == theirs).mean() == 1.0
    assert 0.3 < (ours == y[1000:]).mean() < 1.0   # a real classification problem, not a trivial one


def test_unknown_probe_method_names_the_setting():
    x = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(ValueError, match="probe.method"):
        linear.probe(x[:10], np.arange(10) % 2, x[10:], np.arange(10) % 2, method="svm")


# ---------------------------------------------------------------------------------- Wilson interval

def test_wilson_interval_known_values():
    low, high = linear.wilson_interval(0, 20)
    assert low == pytest.approx(0.0, abs=1e-12) and 0.1 < high < 0.2
    low, high = linear.wilson_interval(20, 20)
    assert high == pytest.approx(1.0, abs=1e-12) and 0.8 < low < 0.9
    low, high = linear.wilson_interval(81, 263)
    assert (round(low, 3), round(high, 3)) == (0.255, 0.366)    # textbook example (Wikipedia, Wilson)
    try:
        from statsmodels.stats.proportion import proportion_confint
    except ImportError:
        return
    for k, n in ((81, 263), (0, 20), (20, 20), (3, 7), (999, 1000)):
        ref = proportion_confint(k, n, alpha=0.05, method="wilson")
        np.testing.assert_allclose(linear.wilson_interval(k, n), ref, atol=1e-9)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError):
        linear.wilson_interval(5, 4)
    assert all(np.isnan(linear.wilson_interval(0, 0)))


def test_cka_matrix_equals_linear_cka_per_layer_pair():
    rng = np.random.default_rng(31)
    base = rng.standard_normal((300, 6))
    a_layers = [base @ rng.standard_normal((6, 8)), rng.standard_normal((300, 8)) + base[:, :1]]
    b_layers = [3.0 * a_layers[0], base[:, :3] ** 2, rng.standard_normal((300, 5))]
    got = measures.cka_matrix(measures.CenteredLayers(a_layers), measures.CenteredLayers(b_layers))
    want = np.array([[measures.linear_cka(x, y) for y in b_layers] for x in a_layers])
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert got[0, 0] == pytest.approx(1.0) and got[1, 2] < 0.2   # the same layer rescaled vs unrelated noise
    with pytest.raises(ValueError, match="rows"):
        measures.cka_matrix(measures.CenteredLayers(a_layers), measures.CenteredLayers([b_layers[0][:10]]))
