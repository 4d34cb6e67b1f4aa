"""The final validation loss broken down where a gap between input interfaces could live.

Every validation token (a target y predicted from input x at position t of its window) falls in
exactly one bucket of each breakdown:
  target_frequency   how often the TARGET token occurs in the training split (PreparedData.
                     train_token_counts): bucket 0 = never, bucket b >= 1 = a count in [2^(b-1), 2^b)
                     (1, 2-3, 4-7, ...);
  input_id_weight    popcount of the INPUT token's id: the Hamming weight of its binary16 code
                     (bit i = (id >> i) & 1), recorded for every arm, learned included, so arms
                     compare on the same tokens;
  input_code_weight  popcount of the input token's code under the arm's own fixed binary code
                     (binary, gf2: the recoded bits, wide, permuted): fixed binary codes only;
  position           the position t of the input in its window (t + 1 tokens of context), log-spaced
                     like the counts: 0, 1, 2-3, 4-7, ...
The bucket of each id (position) is a (V,) ((T,)) int64 table built once per job; LanguageModelTask
holds them as non-persistent buffers and adds up (nats, tokens, bytes) per bucket at the final
validation only. The record (results.json `val_breakdown`, docs/results-schema.md) carries each
bucket's edges (inclusive lower and upper values, labels) beside its sums, so the analysis never
guesses them.

Buckets add up to the whole: tokens and bytes are integer-valued float64 sums (exact below 2^53),
so every breakdown's tokens and bytes equal the validation's exactly; nats are float64 sums of the
same fp32 per-token losses added in another order than val/loss's own sum, so they equal it within
float64 rounding (relative ~1e-13 at 10^6 tokens), not bitwise: val/loss itself is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

TARGET, INPUT, POSITION = "target", "input", "position"
LOG2, WEIGHT = "log2", "weight"


def bit_length(values: np.ndarray) -> np.ndarray:
    """Exact int.bit_length of each non-negative integer: 0 -> 0, 1 -> 1, 2-3 -> 2, 4-7 -> 3, ..."""
    v = np.asarray(values, dtype=np.int64).copy()
    out = np.zeros(v.shape, dtype=np.int64)
    while (v > 0).any():
        out += v > 0
        v >>= 1
    return out


def popcount(values: np.ndarray) -> np.ndarray:
    """Number of 1 bits of each non-negative integer."""
    v = np.asarray(values, dtype=np.int64).copy()
    out = np.zeros(v.shape, dtype=np.int64)
    while (v > 0).any():
        out += v & 1
        v >>= 1
    return out


def log2_edges(n: int) -> tuple[list[int], list[int], list[str]]:
    """Inclusive (lower, upper, label) of log2 buckets 0..n-1: 0, 1, 2-3, 4-7, ..."""
    lower = [0] + [1 << (b - 1) for b in range(1, n)]
    upper = [0] + [(1 << b) - 1 for b in range(1, n)]
    labels = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in zip(lower, upper)]
    return lower, upper, labels


@dataclass
class Breakdown:
    name: str
    of: str             # which token's property: the target, the input, or the position
    kind: str           # log2 buckets of a count / position, or one bucket per code weight
    table: np.ndarray   # (V,) or (T,) int64: the bucket of each id or position
    n: int              # number of buckets, 0..n-1
    definition: str

    def edges(self) -> dict[str, Any]:
        if self.kind == LOG2:
            lower, upper, labels = log2_edges(self.n)
        else:
            lower = upper = list(range(self.n))
            labels = [str(w) for w in lower]
        return {"lower": lower, "upper": upper, "labels": labels}


class LossBreakdown:
    """The breakdowns of one job, and their record."""

    def __init__(self, breakdowns: list[Breakdown], train_counts: dict[str, Any]):
        self.breakdowns = breakdowns
        self.train_counts = dict(train_counts)

    @property
    def n_rows(self) -> int:
        return sum(b.n for b in self.breakdowns)

    def offsets(self) -> list[int]:
        return list(np.cumsum([0] + [b.n for b in self.breakdowns])[:-1])

    def record(self, sums: torch.Tensor, total: torch.Tensor, step: int) -> dict[str, Any]:
        """results.json `val_breakdown` from the reduced (n_rows, 3) bucket sums and the whole's (3,)."""
        sums = sums.detach().to("cpu", torch.float64).numpy()
        nll, tokens, n_bytes = (float(v) for v in total.detach().to("cpu", torch.float64))
        out: dict[str, Any] = {
            "step": int(step),
            "total": {"nats": nll, "tokens": int(tokens), "bytes": int(n_bytes)},
            "train_counts": self.train_counts,
            "breakdowns": {},
        }
        for b, start in zip(self.breakdowns, self.offsets()):
            rows = sums[start : start + b.n]
            out["breakdowns"][b.name] = {
                "of": b.of, "kind": b.kind, "definition": b.definition, **b.edges(),
                "nats": [float(v) for v in rows[:, 0]],
                "tokens": [int(v) for v in rows[:, 1]],
                "bytes": [int(v) for v in rows[:, 2]],
            }
        return out


def input_code_bits(interface: Any) -> np.ndarray | None:
    """(V, K) bits of the arm's own fixed binary code, or None (learned tables, Gaussian codes)."""
    all_bits = getattr(interface, "all_bits", None)
    if not callable(all_bits) or not getattr(interface, "binary_values", False):
        return None
    return np.asarray(all_bits(), dtype=np.int64)


def build_breakdown(counts: np.ndarray, train_counts: dict[str, Any], vocab_size: int, seq_len: int,
                    interface: Any = None) -> LossBreakdown:
    """The breakdowns of a job: from the training split's token counts (V,), the vocabulary, the
    window length and the input interface (its own code, when it is a fixed binary code)."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (vocab_size,):
        raise ValueError(f"token counts of shape {counts.shape} for a vocabulary of {vocab_size}")
    freq = bit_length(counts)
    ids = np.arange(vocab_size, dtype=np.int64)
    id_weight = popcount(ids)
    positions = bit_length(np.arange(seq_len, dtype=np.int64))
    out = [
        Breakdown("target_frequency", TARGET, LOG2, freq, int(freq.max()) + 1,
                  "log2 bucket of the target token's count in the training split (train_counts): "
                  "0 = never seen, then 1, 2-3, 4-7, ..."),
        Breakdown("input_id_weight", INPUT, WEIGHT, id_weight, int(bit_length(np.array([vocab_size - 1]))[0]) + 1,
                  "popcount of the input token id: the Hamming weight of its binary16 code, for every arm"),
    ]
    bits = input_code_bits(interface)
    if bits is not None:
        out.append(Breakdown("input_code_weight", INPUT, WEIGHT, bits.sum(axis=1), bits.shape[1] + 1,
                             "popcount of the input token's code under this arm's own fixed code "
                             f"({bits.shape[1]} bits)"))
    out.append(Breakdown("position", POSITION, LOG2, positions, int(positions.max()) + 1,
                         "log2 bucket of the input's position t in its window (t + 1 tokens of context): "
                         "0, 1, 2-3, 4-7, ..."))
    return LossBreakdown(out, train_counts)
