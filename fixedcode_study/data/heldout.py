"""A held-out vocabulary: the first step of the new-tokens protocol (issue 44).

A model is pretrained with a seeded set H of token IDs absent from its data, then adapted on the
original tokenization, where H occurs. To keep the pretraining text whole, each occurrence of a
held-out token is written as the tokens its BPE merge joined, recursively until no part is in H:
byte-level BPE builds every merged token from exactly one pair, so the parts' bytes are the token's
bytes and the decoded text does not change by a single byte.

    parts = merge_parts(tokenizer)                          # merged id -> (left id, right id)
    held = draw_heldout(counts, parts, fraction=0.05, seed=0)   # H, stratified by training frequency
    spelled = spellings(held, parts)                        # id in H -> its tokens outside H
    stream = rewrite(ids, spelled)                          # the token stream without H

    held, spelled = heldout_of(prepared, fraction=0.05, seed=0) # the same, for a prepared corpus
    pretraining = without_heldout(prepared, fraction=0.05, seed=0)  # its copy without H (train.heldout_fraction)

Which tokens can be held out: merged tokens (not the 256 byte tokens, not a special token) that occur
in training; the draw takes about `fraction` of them from each of `strata` equal-sized frequency
bands (tokens sorted by training count), so H has rare and frequent tokens alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np

from ..errors import ConfigError
from ..record.atomic import atomic_dir
from . import layout
from .prepare import PreparedData
from .split import unigram_val_ppl

Parts = Mapping[int, tuple[int, int]]
FIELD = "train.heldout_fraction"
HELDOUT_DIR = "heldout"   # derived copies live in <cache>/heldout/<fraction>-<seed>/


def merge_parts(tok) -> dict[int, tuple[int, int]]:
    """Each merged token's id -> the ids of the pair its merge joined (a `tokenizers` BPE tokenizer)."""
    model = json.loads(tok.to_str())["model"]
    if model.get("type") != "BPE":
        raise ConfigError("data.tokenizer", f"a {model.get('type')} tokenizer has no merges to spell a held-out "
                          "token with", "hold out tokens of a BPE tokenizer (the built-in one is)")
    vocab = model["vocab"]
    parts: dict[int, tuple[int, int]] = {}
    for merge in model["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge   # both spellings of tokenizers
        parts[vocab[left + right]] = (vocab[left], vocab[right])
    return parts


def draw_heldout(counts: np.ndarray, parts: Parts, fraction: float, seed: int, strata: int = 5) -> np.ndarray:
    """H: the sorted ids drawn from the merged tokens that occur in training (counts[id] > 0), about
    `fraction` of each of `strata` frequency bands (round(fraction x band size), at least one per
    non-empty band), each band with numpy's default_rng([seed, band])."""
    if not 0 < fraction < 1:
        raise ConfigError(FIELD, f"{fraction!r} is not in (0, 1)", "hold out a share such as 0.05")
    if strata < 1:
        raise ConfigError("draw_heldout(strata)", f"{strata!r} is not a positive number of bands", "use e.g. 5")
    counts = np.asarray(counts)
    eligible = np.array(sorted(t for t in parts if t < counts.size and counts[t] > 0), dtype=np.int64)
    if eligible.size < strata:
        raise ConfigError(FIELD, f"only {eligible.size} merged tokens occur in training, fewer than "
                          f"{strata} bands", "use fewer strata or a larger corpus")
    # rarest first; ties by id, so the bands are a function of the counts alone
    order = eligible[np.lexsort((eligible, counts[eligible]))]
    held = []
    for band, members in enumerate(np.array_split(order, strata)):
        take = max(1, round(fraction * members.size))
        held.append(np.random.default_rng([seed, band]).choice(members, size=take, replace=False))
    return np.sort(np.concatenate(held))


def spellings(held: np.ndarray, parts: Parts) -> dict[int, tuple[int, ...]]:
    """Each held-out id -> the ids outside H whose bytes it joins, in order (its merge, recursively)."""
    held_set = {int(t) for t in held}
    missing = sorted(held_set - set(parts))
    if missing:
        raise ConfigError("new_tokens", f"token {missing[0]} has no merge to be spelled with (a byte or special "
                          "token)", "hold out merged tokens only (draw_heldout does)")
    memo: dict[int, tuple[int, ...]] = {}

    def spell(token: int) -> tuple[int, ...]:
        if token not in held_set:
            return (token,)
        if token not in memo:
            left, right = parts[token]
            memo[token] = spell(left) + spell(right)
        return memo[token]

    return {t: spell(t) for t in sorted(held_set)}


def rewrite(ids: np.ndarray, spelled: Mapping[int, tuple[int, ...]], vocab_size: int | None = None) -> np.ndarray:
    """`ids` with every held-out token replaced by its spelling (same dtype); other tokens unchanged."""
    ids = np.asarray(ids)
    size = int(vocab_size if vocab_size is not None else max(int(ids.max(initial=0)), *spelled) + 1)
    lengths = np.ones(size, dtype=np.int64)
    table = [np.array([t]) for t in range(size)]
    for token, spelling in spelled.items():
        lengths[token] = len(spelling)
        table[token] = np.asarray(spelling)
    flat = np.concatenate(table).astype(ids.dtype)       # every token's spelling, token after token
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    n = lengths[ids]
    # output position p belongs to input token i = the one whose run covers p; its offset inside the run
    first_out = np.concatenate([[0], np.cumsum(n)[:-1]])
    within = np.arange(int(n.sum())) - np.repeat(first_out, n)
    return flat[np.repeat(starts[ids], n) + within]


def heldout_of(prepared: PreparedData, fraction: float, seed: int) -> tuple[np.ndarray, dict[int, tuple[int, ...]]]:
    """H for a prepared corpus (drawn from its tokenizer's merges and its training split's counts) and
    each held-out token's spelling: a function of the corpus, the fraction and the seed alone, so the
    pretraining job and the adaptation that follows it find the same set."""
    from tokenizers import Tokenizer

    parts = merge_parts(Tokenizer.from_file(str(prepared.tokenizer_path)))
    counts, _ = prepared.train_token_counts()
    held = draw_heldout(counts, parts, fraction, seed)
    return held, spellings(held, parts)


def heldout_record(held: np.ndarray, fraction: float, seed: int) -> dict:
    """What a record says of H: the settings, its size and its ids."""
    return {"fraction": float(fraction), "seed": int(seed), "tokens": int(held.size), "ids": [int(t) for t in held]}


def without_heldout(prepared: PreparedData, fraction: float, seed: int) -> PreparedData:
    """The corpus with H absent: train.bin and val.bin rewritten (each held-out token spelled with its
    parts), the tokenizer, token bytes and held-out documents unchanged (the text is the same, byte for
    byte, so bits per byte compare with the original's). Written once into the cache, beside the
    corpus it derives from, atomically (jobs side by side share it); its cache_key names both."""
    if prepared.sharded:
        raise ConfigError(FIELD, "holding tokens out rewrites the token stream, which is done for in-memory corpora "
                          "only (this one is pre-tokenized into shards)",
                          "use an in-memory corpus (data=shakespeare, gutenberg or text_files), or null")
    root = prepared.root / HELDOUT_DIR / f"{float(fraction)!r}-{int(seed)}"
    if not (root / layout.META).is_file():
        held, spelled = heldout_of(prepared, fraction, seed)
        vocab = int(prepared.meta["vocab_size"])
        with atomic_dir(root, keep_existing=True) as tmp:
            streams = {}
            for split, name in (("train", layout.TRAIN_TOKENS), ("val", layout.VAL_TOKENS)):
                streams[split] = rewrite(np.asarray(prepared.tokens(split)), spelled, vocab)
                streams[split].tofile(tmp / name)
            for name in (layout.TOKENIZER, layout.TOKEN_BYTES, layout.VAL_DOCS):
                if (prepared.root / name).exists():
                    os.link(prepared.root / name, tmp / name)
            meta = {**prepared.meta, "train_tokens": int(streams["train"].size), "val_tokens": int(streams["val"].size),
                    "cache_key": f"{prepared.meta['cache_key']}+heldout-{float(fraction)!r}-{int(seed)}",
                    "unigram_val_ppl": unigram_val_ppl(np.bincount(streams["train"], minlength=vocab), streams["val"]),
                    "heldout": {**heldout_record(held, fraction, seed), "parent_cache_key": prepared.meta["cache_key"],
                                "parent_train_tokens": int(prepared.meta["train_tokens"]),
                                "parent_val_tokens": int(prepared.meta["val_tokens"])}}
            (tmp / layout.META).write_text(json.dumps(meta, indent=1))
    return PreparedData(root, json.loads((root / layout.META).read_text()))
