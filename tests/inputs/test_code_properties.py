"""Code properties (inputs/stats.py, reported by properties()): known answers and brute-force checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fixedcode_study.build import resolve_input_references
from fixedcode_study.config import available, load_option
from helpers.vocabulary import with_vocabulary
from fixedcode_study.inputs import build_input
from fixedcode_study.inputs.stats import (
    STAT_KEYS,
    bit_entropies,
    code_statistics,
    hamming_mean,
    hamming_min,
)

V, D = 4096, 128  # cpu_tiny


def code(name: str, vocab_size: int = V, d_model: int = D):
    cfg = with_vocabulary(resolve_input_references(load_option("input", name, field="input")), vocab_size)
    return build_input(cfg, vocab_size, d_model)


def naive_distances(bits: np.ndarray) -> np.ndarray:
    """Every pairwise Hamming distance, one pair at a time (slow; small codes only)."""
    return np.array([int((a != b).sum()) for a, b in itertools.combinations(bits, 2)])


def linear_code_min_distance(matrix: np.ndarray, free_bits: int) -> int:
    """Min distance of y = M c mod 2 over all c in {0,1}^free_bits: the minimum weight of M delta
    over nonzero delta (distance is translation invariant in a linear code)."""
    deltas = (np.arange(1, 2**free_bits)[:, None] >> np.arange(free_bits)) & 1  # (2^m - 1, m)
    return int(((deltas @ matrix[:, :free_bits].T.astype(np.int64)) % 2).sum(axis=1).min())


def test_binary16_at_4096_wastes_bits_12_to_15():
    props = code("binary16").properties()
    assert props["constant_bits"] == [12, 13, 14, 15] and props["nonconstant_bits"] == 12
    assert props["bit_entropy_mean"] == 0.75 and props["bit_entropy_min"] == 0.0  # 12 balanced bits, 4 dead
    assert props["hamming_min"] == 1  # IDs 0 and 1
    # each varying bit splits the IDs 2048 / 2048: 12 * 2048^2 differing pairs of the V(V-1)/2
    assert props["hamming_mean"] == pytest.approx(12 * 2048**2 / (V * (V - 1) / 2), rel=1e-12)
    assert props["code_rms"] == pytest.approx(math.sqrt(12 * 0.5 / 16), rel=1e-12) == props["input_rms"]


def test_gf2_at_4096_uses_every_bit_and_has_the_linear_codes_distance():
    layer = code("gf2")
    props = layer.properties()
    assert props["constant_bits"] == [] and props["nonconstant_bits"] == 16
    # every output bit is a nonzero linear form of the 12 free input bits: exactly balanced
    assert props["bit_entropy_mean"] == props["bit_entropy_min"] == 1.0
    assert props["hamming_mean"] == pytest.approx(16 * 2048**2 / (V * (V - 1) / 2), rel=1e-12)
    assert props["hamming_min"] == linear_code_min_distance(layer.matrix_np, 12)
    assert props["code_rms"] == pytest.approx(math.sqrt(0.5), rel=1e-12)


def test_wide_code_full_scan_matches_the_linear_codes_distance():
    """wide K=32 at V=4096 never meets distance 1, so hamming_min scans every pair."""
    layer = code("wide")
    props = layer.properties()
    expected = linear_code_min_distance(layer.code_matrix.numpy().astype(np.int64), 12)
    assert props["hamming_min"] == expected > 1


def test_more_than_half_the_hypercube_has_neighbours():
    """Any set of over 2^15 distinct 16-bit words holds two at distance 1 (the 16-cube is bipartite
    with halves of 2^15), so every injective 16-bit code at the paper's V=49,152 has hamming_min 1."""
    for name in ("binary16", "gf2", "binary16_permuted"):
        props = code(name, vocab_size=49_152, d_model=64).properties()
        assert props["hamming_min"] == 1 and props["nonconstant_bits"] == 16, name


@pytest.mark.parametrize("width", [5, 16, 40, 70])  # one uint32 word, one uint64, two uint64 words
def test_hamming_min_and_mean_against_brute_force(width):
    rng = np.random.default_rng(width)
    bits = rng.integers(0, 2, size=(120, width), dtype=np.uint8)
    distances = naive_distances(bits)
    assert hamming_min(bits) == distances.min()
    assert hamming_mean(bits) == pytest.approx(distances.mean(), rel=1e-12)
    bits[7] = bits[99]  # two IDs sharing a codeword: distance 0
    assert hamming_min(bits) == 0


def test_bit_entropy_known_values():
    bits = np.array([[0, 0, 1, 0], [1, 0, 1, 0], [0, 0, 1, 0], [1, 0, 1, 1]], dtype=np.uint8)
    h = bit_entropies(bits)  # p = 1/2, 0, 1, 1/4
    assert h[:3].tolist() == [1.0, 0.0, 0.0]
    assert h[3] == pytest.approx(-(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)), rel=1e-12)


def test_real_valued_codes_report_constant_coordinates_only():
    stats = code_statistics(np.array([[0.5, 1.0, -2.0], [0.5, 3.0, 1.0]]), binary=False)
    assert stats["constant_bits"] == [0] and stats["nonconstant_bits"] == 2
    assert all(stats[k] is None for k in ("bit_entropy_mean", "bit_entropy_min", "hamming_mean", "hamming_min"))
    props = code("gaussian16").properties()
    assert props["nonconstant_bits"] == 16 and props["constant_bits"] == [] and props["hamming_min"] is None


@pytest.mark.parametrize("name", available("input"))
def test_every_input_reports_the_statistics_and_its_rms(name):
    layer = code(name, vocab_size=512, d_model=64)
    props = layer.properties()
    assert set(STAT_KEYS) | {"code_rms"} <= set(props), name
    if props.get("trainable") is not None:  # learned tables: statistics do not apply
        assert all(props[k] is None for k in STAT_KEYS), name
    elif props.get("map"):  # a map over a fixed code: the code's statistics; the RMS exact at init
        with torch.no_grad():
            out = layer(torch.arange(512)[None])[0].double()
        assert props["code_rms"] == pytest.approx(out.pow(2).mean().sqrt().item(), rel=1e-5), name
        assert props["nonconstant_bits"] + len(props["constant_bits"]) == props["code_width"], name
    else:  # fixed codes: the RMS is the module's own output over every ID, exactly
        with torch.no_grad():
            out = layer(torch.arange(512)[None])[0].double()  # (V, d)
        assert props["code_rms"] == pytest.approx(out.pow(2).mean().sqrt().item(), rel=1e-6), name
        assert props["nonconstant_bits"] + len(props["constant_bits"]) == props["code_width"], name


def test_learned_tables_report_their_rms_at_init():
    assert code("learned").properties()["code_rms"] == 0.02
    # code_stats starts each coordinate at the code's mean and std: the code's RMS in expectation
    stats = code("learned_codestats")
    assert stats.properties()["code_rms"] == pytest.approx(code("binary16").properties()["code_rms"], rel=1e-6)
    drawn = stats.table.weight.detach().double().pow(2).mean().sqrt().item()
    assert drawn == pytest.approx(stats.properties()["code_rms"], rel=0.01)
