"""Linear algebra over GF(2) on small dense 0/1 matrices (numpy uint8).

The matrices here are K x K with K <= 64 (code widths), so plain Gaussian elimination is
instant; clarity beats bit-packing tricks.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np


def gf2_rank(matrix: np.ndarray) -> int:
    """Rank over GF(2) by Gaussian elimination (rows XORed, never added)."""
    m = (np.asarray(matrix, dtype=np.uint8) & 1).copy()
    rows, cols = m.shape
    rank = 0
    for col in range(cols):
        pivot = next((r for r in range(rank, rows) if m[r, col]), None)
        if pivot is None:
            continue
        m[[rank, pivot]] = m[[pivot, rank]]
        below_or_above = np.nonzero(m[:, col])[0]
        for r in below_or_above:
            if r != rank:
                m[r] ^= m[rank]
        rank += 1
        if rank == rows:
            break
    return rank


def gf2_inverse(matrix: np.ndarray) -> np.ndarray:
    """Inverse over GF(2) via elimination on [A | I]; raises if A is singular."""
    a = np.asarray(matrix, dtype=np.uint8) & 1
    k = a.shape[0]
    if a.shape != (k, k):
        raise ValueError(f"gf2_inverse needs a square matrix, got {a.shape}")
    aug = np.concatenate([a.copy(), np.eye(k, dtype=np.uint8)], axis=1)
    for col in range(k):
        pivot = next((r for r in range(col, k) if aug[r, col]), None)
        if pivot is None:
            raise ValueError("matrix is singular over GF(2)")
        aug[[col, pivot]] = aug[[pivot, col]]
        for r in np.nonzero(aug[:, col])[0]:
            if r != col:
                aug[r] ^= aug[col]
    return aug[:, k:].copy()


def gf2_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product mod 2 (int64 accumulation cannot overflow for K <= 64)."""
    return (np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64)) % 2


def weight_constraint_feasible(k: int, min_weight: int) -> bool:
    """Rule out weight constraints that no invertible K x K matrix can meet.

    A weight above K is impossible, and weight exactly K makes every row the all-ones vector
    (rank 1), so it only works for K = 1. Every weight <= K - 1 is achievable
    (`dense_feasible_matrix`), so this test is exact.
    """
    if min_weight <= 0:
        return True
    if min_weight > k:
        return False
    if min_weight == k:
        return k == 1
    return True


@dataclass(frozen=True)
class SampledMatrix:
    matrix: np.ndarray          # (K, K) uint8, invertible over GF(2)
    shift: np.ndarray | None    # (K,) uint8 when affine
    draws: int                  # rejection draws used (0 for the walk)
    method: str                 # "rejection" or "walk"


def uniform_row_pass_probability(k: int, min_weight: int) -> float:
    """P(a uniform random K-bit row has weight >= min_weight)."""
    return sum(math.comb(k, w) for w in range(max(0, min_weight), k + 1)) / 2**k


def sample_constrained(
    k: int, seed: int, min_weight: int, affine: bool, max_tries: int = 100_000
) -> SampledMatrix:
    """Seeded draw of an invertible K x K matrix whose rows and columns all have weight >= min_weight.

    1. Rejection sampling of uniform 0/1 matrices (exactly uniform over the constrained set).
       This is the original sampler: every (k, seed, min_weight) it ever answered still gives
       the same matrix.
    2. When rejection cannot succeed in practice (expected accepted draws in `max_tries` < 0.01,
       treating the 2K weight tests as independent; e.g. K=16, min_weight=8) or ran out of
       draws (the old sampler raised there), a seeded random walk
       inside the constrained set: start from a dense feasible matrix, permute rows and columns,
       then flip single entries, keeping a flip only if weights stay >= min_weight and A stays
       invertible. Not exactly uniform, but every feasible constraint gets a matrix, deterministically.
    Infeasible constraints (`weight_constraint_feasible` is False) raise ValueError.
    """
    if not weight_constraint_feasible(k, min_weight):
        raise ValueError(f"no invertible {k}x{k} GF(2) matrix has all row/column weights >= {min_weight}")
    rng = np.random.default_rng(seed)
    hopeless = uniform_row_pass_probability(k, min_weight) ** (2 * k) * max_tries < 0.01
    if not hopeless:
        for attempt in range(1, max_tries + 1):
            a = rng.integers(0, 2, size=(k, k), dtype=np.uint8)
            if a.sum(axis=1).min() < min_weight or a.sum(axis=0).min() < min_weight:
                continue
            if gf2_rank(a) != k:
                continue
            b = rng.integers(0, 2, size=k, dtype=np.uint8) if affine else None
            return SampledMatrix(a, b, attempt, "rejection")
    walk_rng = np.random.default_rng([seed, k, max(0, min_weight), 1])  # its own stream
    a = _constrained_walk(k, min_weight, walk_rng)
    b = walk_rng.integers(0, 2, size=k, dtype=np.uint8) if affine else None
    return SampledMatrix(a, b, 0, "walk")


def dense_feasible_matrix(k: int) -> np.ndarray:
    """An invertible K x K matrix with every row and column weight >= K - 1 (the densest possible).

    Even K: J - I (its own inverse, since (J - I)^2 = K J + I = I mod 2).
    Odd K: J - I with the last row replaced by all ones (adding that row to the others gives e_i).
    """
    if k == 1:
        return np.ones((1, 1), dtype=np.uint8)
    a = (np.ones((k, k), dtype=np.uint8) - np.eye(k, dtype=np.uint8))
    if k % 2:
        a[-1] = 1
    return a


def _constrained_walk(k: int, min_weight: int, rng: np.random.Generator) -> np.ndarray:
    a = dense_feasible_matrix(k)[rng.permutation(k)][:, rng.permutation(k)].copy()
    inv = gf2_inverse(a)
    rows, cols = a.sum(axis=1).astype(np.int64), a.sum(axis=0).astype(np.int64)
    for _ in range(4 * k * k):
        i, j = (int(v) for v in rng.integers(0, k, size=2))
        delta = 1 - 2 * int(a[i, j])  # +1 sets the bit, -1 clears it
        if rows[i] + delta < min_weight or cols[j] + delta < min_weight:
            continue
        # Flipping A[i, j] adds e_i e_j^T: the result is invertible iff (A^-1)[j, i] == 0, and then
        # (Sherman-Morrison over GF(2)) the new inverse is A^-1 + (A^-1 e_i)(e_j^T A^-1).
        if inv[j, i]:
            continue
        inv ^= np.outer(inv[:, i], inv[j, :]).astype(np.uint8)
        a[i, j] ^= 1
        rows[i] += delta
        cols[j] += delta
    if gf2_rank(a) != k or a.sum(axis=1).min() < min_weight or a.sum(axis=0).min() < min_weight:
        raise RuntimeError(f"constrained GF(2) walk ended outside its constraints (k={k}, min_weight={min_weight})")
    return a


def matrix_sha256(a: np.ndarray, b: np.ndarray | None) -> str:
    """Stable fingerprint of the recoding (A and b), independent of dtype and memory layout."""
    h = hashlib.sha256()
    h.update(f"{a.shape[0]}x{a.shape[1]}:".encode())
    h.update(np.ascontiguousarray(a, dtype=np.uint8).tobytes())
    if b is not None:
        h.update(b"b:" + np.ascontiguousarray(b, dtype=np.uint8).tobytes())
    return h.hexdigest()
