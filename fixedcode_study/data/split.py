"""Which documents are held out for validation: one rule, named by `data.split`, for every path.

Both ways a corpus is prepared (in memory, prepare.py; sharded, shards.py) read the same
documents (corpus.piece_documents) and hold out the same ones, by one of two rules:

  shuffle    a seeded permutation of the documents in corpus order; whole documents are taken
             for validation, in that order, until val_fraction of the corpus's characters is held
             out (at least one). The share is met closely, but the choice needs every document's
             size first: the sharded path reads the corpus once more before tokenizing it.
             In a mixture each source is split on its own.
  name_hash  a document is held out iff a seeded hash of its name falls below val_fraction of the
             hash range: decided one document at a time, whatever the pieces or workers, so it
             suits corpora too large to list; the held-out share is val_fraction only on average.

Each data config names its rule (conf/data/*.yaml). Before the setting existed the in-memory
sources (shakespeare, text_files) were split by `shuffle` and the pre-tokenized ones (hf,
mixture, and the pretokenize command on any source) by `name_hash`. A setting equal to what an
existing key or fingerprint already implied is left out of it (`key_settings`, `identity`), so
every cache key and job fingerprint computed before the setting existed stays what it was.

The held-out split's reference figure, the add-one unigram perplexity, is computed here once for
both paths (`unigram_val_ppl`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from ..errors import ConfigError

SHUFFLE = "shuffle"
NAME_HASH = "name_hash"
RULES = (SHUFFLE, NAME_HASH)
# The rule each source's jobs were split by before data.split existed: their fingerprints imply it.
LEGACY_RULE = {"shakespeare": SHUFFLE, "text_files": SHUFFLE, "hf": NAME_HASH, "mixture": NAME_HASH}
# The rule each cache layout's key implied before data.split existed (prepare.py: in memory,
# shards.py: pre-tokenized, whatever the source).
IN_MEMORY_KEY_RULE, SHARDED_KEY_RULE = SHUFFLE, NAME_HASH


def is_validation(name: str, seed: int, fraction: float) -> bool:
    """name_hash: held out iff a seeded hash of the document name falls below `fraction` of the hash range."""
    h = hashlib.blake2b(f"{seed}\0{name}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "big") < fraction * 2.0**64


@dataclass(frozen=True)
class Split:
    """A validated split rule: `rule` (shuffle | name_hash), `fraction` held out, `seed`."""

    rule: str
    fraction: float
    seed: int

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ConfigError("data.split", f"{self.rule!r} is not a split rule", f"use one of {', '.join(RULES)}")
        if not 0.0 < self.fraction < 1.0:
            raise ConfigError("data.val_fraction", f"{self.fraction} is not between 0 and 1", "use e.g. 0.01")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], val_fraction: float = 0.03, split_seed: int = 0) -> "Split":
        """The data config's rule; a config without `split` (written before it existed) gets its
        source's former rule. `val_fraction` / `split_seed`: used where the config leaves them null."""
        fraction = cfg.get("val_fraction")
        seed = cfg.get("split_seed")
        return cls(rule_of(cfg), float(val_fraction if fraction is None else fraction),
                   int(split_seed if seed is None else seed))

    @property
    def per_document(self) -> bool:
        """True when each document's side follows from its name alone (no pass over the corpus)."""
        return self.rule == NAME_HASH

    def held_out(self, documents: Iterable[tuple[str, int]]) -> frozenset[str]:
        """Names of the held-out documents among (name, size in characters), given in corpus order."""
        if self.per_document:
            return frozenset(name for name, _ in documents if is_validation(name, self.seed, self.fraction))
        docs = list(documents)
        order = np.random.default_rng(self.seed).permutation(len(docs))
        total = sum(size for _, size in docs)
        held, held_size = [], 0
        for i in order:
            if held_size >= self.fraction * total:
                break
            held.append(docs[i][0])
            held_size += docs[i][1]
        return frozenset(held)

    def membership(self, held: Iterable[str] | None = None) -> "HeldOut":
        """A picklable test `name in split`: `held` is held_out()'s answer for the shuffle rule."""
        if not self.per_document and held is None:
            raise ValueError("the shuffle rule needs the held-out names (Split.held_out) first")
        return HeldOut(self, None if self.per_document else frozenset(held or ()))


@dataclass(frozen=True)
class HeldOut:
    """Whether a document (by name) is held out, for a worker that sees one piece of the corpus."""

    split: Split
    names: frozenset[str] | None  # the shuffle rule's choice; None: name_hash decides per name

    def __contains__(self, name: str) -> bool:
        if self.names is None:
            return is_validation(name, self.split.seed, self.split.fraction)
        return name in self.names


def rule_of(cfg: Mapping[str, Any]) -> str:
    """The rule a data config asks for: data.split, else (a config from before it) its source's former rule."""
    rule = cfg.get("split")
    if rule is None:
        return LEGACY_RULE.get(str(cfg.get("source")), NAME_HASH)
    if rule not in RULES:
        raise ConfigError("data.split", f"{rule!r} is not a split rule", f"use one of {', '.join(RULES)}")
    return str(rule)


def key_settings(rule: str, key_rule: str) -> dict[str, str]:
    """{"split": rule} for a cache key, or {} where the layout's key already implied this rule."""
    return {} if rule == key_rule else {"split": rule}


def identity(data: Mapping[str, Any]) -> dict[str, Any]:
    """The data config as a job's fingerprint hashes it: without `split` where it is the rule the
    source's jobs had before the setting existed (so their fingerprints stay), with it otherwise.
    An unknown rule is refused here, at the front door."""
    out = dict(data)
    if "split" in out:
        rule = rule_of(out)
        if rule == LEGACY_RULE.get(str(out.get("source"))):
            out.pop("split")
    return out


def unigram_val_ppl(train_counts: np.ndarray, val: np.ndarray) -> float | None:
    """Perplexity of an add-one unigram model fit on the training split's token counts
    ((V,) int64, V the vocabulary smoothed over), scored on every held-out token; None if there
    are none. Summed in chunks of 2^24 tokens, to bound the float64 copy (the same bits as one
    mean below that)."""
    if val.size == 0:
        return None
    logp = np.log((train_counts + 1.0) / (train_counts.sum() + train_counts.size))
    total = sum(float(logp[val[i : i + (1 << 24)]].sum()) for i in range(0, val.size, 1 << 24))
    return float(math.exp(-total / val.size))
