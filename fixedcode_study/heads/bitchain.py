"""A table-free, exactly normalised head over the token's fixed code bits (a binary-tree softmax).

Each token ID v has a fixed K-bit code b(v) (binary16, gf2, ...: `output.code`, any binary code of
conf/input). The head factorises its probability bit by bit,

    p(v | h) = prod_k p(b_k(v) | b_<k(v), h),

a hierarchical softmax (Morin & Bengio 2005; Mnih & Hinton 2009) over the fixed binary tree of the
code, in the family of binary-code output layers (Oda et al., ACL 2017), except that every
conditional sees the bits before it, so the product is a proper distribution, not K independent
guesses. The conditional is shared: none of its parameters depends on V.

    z_k(h, b_<k) = a_k . h + beta_k + sum_{j<k} s_j (m_kj . h + c_kj),   s_j = 2 b_j - 1 in {-1, +1}
    p(b_k = 1 | b_<k, h) = sigmoid(z_k)

a (K, d), beta (K,), m (P, d), c (P,) with P = K(K-1)/2 pairs j < k: a bilinear chain, (K + P) d
+ K + P parameters (17,544 at K = 16, d = 128; 278,664 at d = 2,048, against the untied head's V d).

Valid IDs only. V is rarely a power of two, and a recoded GF(2) code's valid set is the image of
0..V-1. At bit k, when no valid code continues the prefix b_<k with the other bit, the step is
forced: the valid branch gets probability 1 (the step contributes 0 nats). So the V valid IDs'
probabilities sum to 1 exactly (up to float rounding) and every other K-bit pattern gets 0. The
`free` table (V, K) marks the steps that are choices; it is computed once from the code.

Cost. Training and validation know the target, so they walk its one path (teacher forcing, all K
bits in parallel): per token 6 (K + P) d FLOPs for the two projections plus 4 P K for summing the
pair terms into their bits, against 6 V d for an untied head (at K = 16, V = 49,152, d = 2,048:
1.68M against 604M, 360x fewer). The full (…, V) log-probabilities (generation, lm-eval's
log-likelihoods, the export) evaluate every path: (…, V, K) logits, V K (2 P + 3) FLOPs per position.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..inputs import FixedBinaryCode, init_normal_
from .base import OutputHead

MAX_BITS = 62  # prefixes are int64 keys


def pair_count(code_width: int) -> int:
    return code_width * (code_width - 1) // 2


def chain_tables(bits: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """bits (V, K) {0,1} -> (free (V, K) bool, the sorted valid prefixes of length k+1 for each k).

    free[v, k]: some valid code shares v's first k bits and differs at bit k (the step is a choice).
    """
    V, K = bits.shape
    free = np.zeros((V, K), dtype=bool)
    prefix = np.zeros(V, dtype=np.int64)
    valid: list[np.ndarray] = []
    for k in range(K):
        prefix = prefix | (bits[:, k].astype(np.int64) << k)  # v's bits 0..k as one integer
        known = np.unique(prefix)
        free[:, k] = np.isin(prefix ^ (1 << k), known, assume_unique=False)
        valid.append(known)
    return free, valid


class BitChainHead(OutputHead):
    kind = "bitchain"
    teacher_forced = True

    def __init__(self, vocab_size: int, d_model: int, code: FixedBinaryCode, code_label: str):
        super().__init__(vocab_size, d_model)
        if not isinstance(code, FixedBinaryCode):
            raise ConfigError("output.code", f"{code_label!r} ({code.kind}) is not a binary code: a bit chain needs bits",
                              "use a binary code such as binary16, gf2 or wide")
        bits = code.all_bits()  # (V, K) uint8, the code's own implementation
        K = bits.shape[1]
        if K > MAX_BITS:
            raise ConfigError("output.code", f"{code_label!r} has {K} bits; the chain walks at most {MAX_BITS}",
                              "use a code of at most 62 bits")
        self.code_width, self.code_label, self.code_kind = K, code_label, code.kind
        object.__setattr__(self, "_code", code)  # for its statistics only; not a submodule
        free, self._valid_prefixes = chain_tables(bits)
        P = pair_count(K)
        pair_k, pair_j = np.tril_indices(K, k=-1)  # the P pairs j < k, row by row
        self.bit_weight = nn.Parameter(torch.empty(K, d_model))   # a (K, d)
        self.bit_bias = nn.Parameter(torch.zeros(K))              # beta (K,)
        self.pair_weight = nn.Parameter(torch.empty(P, d_model))  # m (P, d)
        self.pair_bias = nn.Parameter(torch.zeros(P))             # c (P,)
        # Constants rebuilt from the code at every build (never in a checkpoint):
        self.register_buffer("signs", torch.from_numpy(2.0 * bits.astype(np.float32) - 1.0), persistent=False)  # (V, K)
        self.register_buffer("free", torch.from_numpy(free.astype(np.float32)), persistent=False)  # (V, K) 1 = a choice
        self.register_buffer("pair_j", torch.from_numpy(pair_j.astype(np.int64)), persistent=False)  # (P,)
        scatter = np.zeros((P, K), dtype=np.float32)
        scatter[np.arange(P), pair_k] = 1.0
        self.register_buffer("pair_to_bit", torch.from_numpy(scatter), persistent=False)  # (P, K) one-hot

    @classmethod
    def trainable_count(cls, settings, vocab_size, d_model, code_width) -> int:
        P = pair_count(code_width)
        return (code_width + P) * d_model + code_width + P

    @classmethod
    def training_flops(cls, settings, vocab_size, d_model, code_width) -> int:
        P = pair_count(code_width)
        return 6 * (code_width + P) * d_model + 4 * P * code_width

    def reset_parameters(self, generator: torch.Generator | None, std: float) -> None:
        init_normal_(self.bit_weight, std, generator)  # the head stream: a, then m; biases start at 0
        init_normal_(self.pair_weight, std, generator)
        with torch.no_grad():
            self.bit_bias.zero_()
            self.pair_bias.zero_()

    # -- the conditional -------------------------------------------------------------------------
    def _projections(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h (…, d) -> (a.h + beta (…, K), m.h + c (…, P)), in fp32 whatever the autocast."""
        u = F.linear(h, self.bit_weight).float() + self.bit_bias  # (…, K)
        g = F.linear(h, self.pair_weight).float() + self.pair_bias  # (…, P)
        return u, g

    def bit_logits(self, h: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
        """h (…, d), the path's signs (…, K) -> z (…, K): each bit's logit given the bits before it."""
        u, g = self._projections(h)
        return u + (g * signs[..., self.pair_j]) @ self.pair_to_bit  # (…, P) -> (…, K)

    def nll(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: -log p(target | h) (…) in fp32, walking only the target's path."""
        signs, free = self.signs[targets], self.free[targets]  # (…, K) each
        z = self.bit_logits(h, signs)  # (…, K)
        return -(free * F.logsigmoid(signs * z)).sum(dim=-1)  # (…)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h (…, d) -> log p(v | h) for all V IDs (…, V): already normalised, so they are logits too.

        Positions go through in chunks: each needs a (V, K) fp32 block of bit logits, 3 MiB at
        V = 49,152 and K = 16, so a chunk of CHUNK positions bounds the peak at CHUNK x that (one
        2,048-token sequence at once would be 6 GiB). The chunks change no number."""
        flat = h.reshape(-1, h.shape[-1])  # (N, d)
        out = [self._all_log_probs(flat[i:i + self.CHUNK]) for i in range(0, flat.shape[0], self.CHUNK)]
        logp = torch.cat(out) if out else flat.new_zeros(0, self.vocab_size, dtype=torch.float32)
        return logp.view(*h.shape[:-1], self.vocab_size)  # (…, V)

    CHUNK = 64

    def _all_log_probs(self, h: torch.Tensor) -> torch.Tensor:
        """h (N, d) -> (N, V)."""
        u, g = self._projections(h)  # (N, K), (N, P)
        # z[n, v, k] = u_k + sum_p signs[v, j_p] g_p [k_p = k]: one (V, P) x (N, P, K) product
        pair_signs = self.signs[:, self.pair_j]  # (V, P)
        z = u.unsqueeze(-2) + pair_signs @ (g.unsqueeze(-1) * self.pair_to_bit)  # (N, V, K)
        return (self.free * F.logsigmoid(self.signs * z)).sum(dim=-1)  # (N, V)

    def code_log_probs(self, h: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
        """h (d,), any K-bit patterns (N, K) -> log p (N,): -inf for a pattern no valid ID has.

        For checks (probabilities over all 2^K patterns); training and evaluation never need it."""
        b = bits.to("cpu", torch.int64).numpy()
        prefix = np.zeros(len(b), dtype=np.int64)
        free = np.zeros(b.shape, dtype=bool)
        reachable = np.ones(len(b), dtype=bool)
        for k, known in enumerate(self._valid_prefixes):
            free[:, k] = np.isin(prefix | ((1 - b[:, k]) << k), known)  # the other branch is valid
            prefix = prefix | (b[:, k] << k)
            reachable &= np.isin(prefix, known)
        signs = torch.from_numpy(2.0 * b.astype(np.float32) - 1.0).to(h.device)
        z = self.bit_logits(h.expand(len(b), -1), signs)  # (N, K)
        logp = (torch.from_numpy(free.astype(np.float32)).to(h.device) * F.logsigmoid(signs * z)).sum(dim=-1)
        return torch.where(torch.from_numpy(reachable).to(h.device), logp, torch.full_like(logp, float("-inf")))

    def properties(self) -> dict[str, Any]:
        free = self.free.cpu().numpy()
        return {**super().properties(), "code": self.code_label, "code_type": self.code_kind,
                "code_width": self.code_width, "pairs": pair_count(self.code_width),
                "free_steps_mean": float(free.sum(axis=1).mean()),   # choices per token (log2 V for a full tree)
                "forced_bits": [k for k in range(self.code_width) if not free[:, k].any()],
                "logit_rank_bound": None,  # the log-probabilities are not a linear map of h
                "code_statistics": self._code.code_statistics()}
