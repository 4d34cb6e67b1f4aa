"""Linear algebra over GF(2) on small dense 0/1 matrices (numpy uint8).

The matrices here are K x K with K <= 64 (code widths), so plain Gaussian elimination is
instant; clarity beats bit-packing tricks.
"""

from __future__ import annotations

import hashlib

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
    (rank 1), so it only works for K = 1. Tighter limits exist but are not needed: the seeded
    search below reports clearly when it cannot find a matrix.
    """
    if min_weight <= 0:
        return True
    if min_weight > k:
        return False
    if min_weight == k:
        return k == 1
    return True


def sample_invertible(
    k: int, seed: int, min_weight: int, affine: bool, max_tries: int = 100_000
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Draw A (K x K, full GF(2) rank, row/col weights >= min_weight) and optional shift b.

    Rejection sampling from a seeded numpy Generator: the same (k, seed, min_weight, affine)
    always yields the same matrix. Returns (A, b or None, number of draws it took).
    """
    rng = np.random.default_rng(seed)
    for attempt in range(1, max_tries + 1):
        a = rng.integers(0, 2, size=(k, k), dtype=np.uint8)
        if a.sum(axis=1).min() < min_weight or a.sum(axis=0).min() < min_weight:
            continue
        if gf2_rank(a) != k:
            continue
        b = rng.integers(0, 2, size=k, dtype=np.uint8) if affine else None
        return a, b, attempt
    raise RuntimeError(
        f"no invertible {k}x{k} GF(2) matrix with row/column weight >= {min_weight} "
        f"found in {max_tries} draws from seed {seed}"
    )


def matrix_sha256(a: np.ndarray, b: np.ndarray | None) -> str:
    """Stable fingerprint of the recoding (A and b), independent of dtype and memory layout."""
    h = hashlib.sha256()
    h.update(f"{a.shape[0]}x{a.shape[1]}:".encode())
    h.update(np.ascontiguousarray(a, dtype=np.uint8).tobytes())
    if b is not None:
        h.update(b"b:" + np.ascontiguousarray(b, dtype=np.uint8).tobytes())
    return h.hexdigest()
