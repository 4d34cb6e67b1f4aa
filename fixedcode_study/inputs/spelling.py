"""`spelling`: a fixed binary code computed from each token's own string, not from its ID.

The rule (after T-FREE, arXiv 2406.19223, which builds inputs from hashed character trigrams):

  1. The token's string s is the tokenizer's own vocabulary entry for the ID (`tokenizers`'
     id_to_token: for the byte-level BPE one character per byte, "Ġ" for a space), lower-cased when
     `lowercase` is set. An ID the tokenizer has no entry for has the empty string.
  2. Every character n-gram of s, n = 1..max_ngram (each distinct n-gram once), is hashed with
     BLAKE2b keyed by `hash_seed`; the digest gives `hashes` positions in [0, spelling_bits), and
     those bits are set (a Bloom filter of the token's n-grams).
  3. Then `id_bits` = ceil(log2 V) more bits: the canonical ID bits (bit i = (id >> i) & 1) for a
     token whose spelling bits equal another token's, zeros for every other token. So the code is
     injective whatever the hashes do, and tokens keep their spelling-only code where it is unique.
     finalize() checks injectivity on the values forward computes.

K = spelling_bits + id_bits coordinates, values {0,1} (or {-1,+1}), scaled and tiled to d_model as
every fixed code. No trainable parameter. The (V, K) code is a persistent buffer: a checkpoint
carries it, and the export writes it as a "table" code (hub/modeling_fixedcode.py).

The vocabulary arrives as a list of V strings in the input settings (`vocabulary`). A job resolves
`vocabulary: data` to its own tokenizer's strings once, at the front door (spec/vocabulary.py), so
the stored spec holds the strings the code was computed from.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np
import torch

from ..errors import ConfigError
from .base import FixedCode
from .tiling import check_code_width_fits, minimal_code_width, tiling_properties

DEFAULT_SPELLING_BITS = 48


def ngram_positions(token: str, spelling_bits: int, max_ngram: int, hashes: int, hash_seed: int) -> set[int]:
    """Bit positions the token's character n-grams (n = 1..max_ngram) set (module docstring, step 2)."""
    key = int(hash_seed).to_bytes(8, "little")
    positions: set[int] = set()
    grams = {token[i:i + n] for n in range(1, max_ngram + 1) for i in range(len(token) - n + 1)}
    for gram in sorted(grams):
        digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8 * hashes, key=key).digest()
        for j in range(hashes):
            positions.add(int.from_bytes(digest[8 * j:8 * j + 8], "little") % spelling_bits)
    return positions


def spelling_code_bits(vocabulary: Sequence[str], spelling_bits: int, max_ngram: int, hashes: int,
                       hash_seed: int, lowercase: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """(V, spelling_bits + ceil(log2 V)) uint8 bits of the whole vocabulary, and facts about the collisions."""
    vocab_size = len(vocabulary)
    id_bits = minimal_code_width(vocab_size)
    bits = np.zeros((vocab_size, spelling_bits + id_bits), dtype=np.uint8)
    for token_id, token in enumerate(vocabulary):
        text = token.lower() if lowercase else token
        bits[token_id, sorted(ngram_positions(text, spelling_bits, max_ngram, hashes, hash_seed))] = 1
    spelled = np.packbits(bits[:, :spelling_bits], axis=1)  # (V, bytes): one key per spelling code
    _, group, sizes = np.unique(spelled, axis=0, return_inverse=True, return_counts=True)
    collided = sizes[group.ravel()] > 1  # (V,) this token's spelling bits equal another token's
    ids = np.nonzero(collided)[0]
    bits[ids, spelling_bits:] = (ids[:, None] >> np.arange(id_bits)) & 1
    return bits, {"collided_tokens": int(collided.sum()), "collision_groups": int((sizes > 1).sum()),
                  "largest_collision_group": int(sizes.max()) if len(sizes) else 0}


def vocabulary_sha256(vocabulary: Sequence[str]) -> str:
    h = hashlib.sha256()
    for token in vocabulary:
        h.update(token.encode("utf-8", "surrogatepass") + b"\x00")
    return h.hexdigest()


class SpellingCode(FixedCode):
    """The spelling code (module docstring). `vocabulary`: one string per token ID, V of them."""

    kind = "spelling"
    binary_values = True

    def __init__(self, vocab_size: int, d_model: int, vocabulary: Sequence[str] | str | None = None,
                 spelling_bits: int = DEFAULT_SPELLING_BITS, max_ngram: int = 3, hashes: int = 2, hash_seed: int = 0,
                 lowercase: bool = False, values: str = "01", scale: float | str = 1.0, reference_std: float = 0.02):
        super().__init__(vocab_size, d_model)
        if vocabulary is None or isinstance(vocabulary, str):
            raise ConfigError("input.vocabulary", f"the spelling code needs the token strings, got {vocabulary!r}",
                              "run it as a job (input.vocabulary=data takes the job's tokenizer) or pass a list of V strings")
        if len(vocabulary) != vocab_size or not all(isinstance(t, str) for t in vocabulary):
            raise ConfigError("input.vocabulary", f"{len(vocabulary)} entries for a vocabulary of {vocab_size}",
                              "give one string per token ID (input.vocabulary=data resolves the job's tokenizer)")
        for field, value, low in (("spelling_bits", spelling_bits, 1), ("max_ngram", max_ngram, 1), ("hashes", hashes, 1)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
                raise ConfigError(f"input.{field}", f"{value!r} is not an integer >= {low}", f"set input.{field}>={low}")
        if values not in ("01", "pm1"):
            raise ConfigError("input.values", f"unknown value set {values!r}", "use '01' or 'pm1'")
        self.spelling_bits, self.max_ngram, self.hashes = spelling_bits, max_ngram, hashes
        self.hash_seed, self.lowercase, self.values = int(hash_seed), bool(lowercase), values
        self.id_bits = minimal_code_width(vocab_size)
        self.code_width = spelling_bits + self.id_bits
        check_code_width_fits(self.code_width, d_model)
        self._init_scale(scale, reference_std)
        bits, self.collisions = spelling_code_bits(vocabulary, spelling_bits, max_ngram, hashes, self.hash_seed,
                                                   self.lowercase)
        self.vocabulary_sha256 = vocabulary_sha256(vocabulary)
        self.code_sha256 = hashlib.sha256(bits.tobytes()).hexdigest()
        # Persistent, built on the CPU even under a meta context: checkpoints carry the exact code.
        self.register_buffer("spelling_bits_table", torch.from_numpy(bits.astype(np.float32)))

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        bits = self.spelling_bits_table[idx]  # (…, K) {0,1}
        return bits if self.values == "01" else 2.0 * bits - 1.0

    def statistics_values(self) -> np.ndarray:
        return self.spelling_bits_table.to(device="cpu", dtype=torch.uint8).numpy()

    def properties(self) -> dict[str, Any]:
        bits = self.spelling_bits_table[:, : self.spelling_bits]
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),
            "values": "{0,1}" if self.values == "01" else "{-1,+1}",
            **self.scale_properties(),
            "injective": self.check_injective(),
            **self.code_statistics(),
            "spelling_bits": self.spelling_bits,
            "id_bits": self.id_bits,
            "max_ngram": self.max_ngram,
            "hashes": self.hashes,
            "hash_seed": self.hash_seed,
            "lowercase": self.lowercase,
            "mean_spelling_bits_set": float(bits.sum(dim=1).mean()),
            **self.collisions,
            "vocabulary_sha256": self.vocabulary_sha256,
            "code_sha256": self.code_sha256,
        }
