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

Which tokens can be held out: merged tokens (not the 256 byte tokens, not a special token) that occur
in training; the draw takes about `fraction` of them from each of `strata` equal-sized frequency
bands (tokens sorted by training count), so H has rare and frequent tokens alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from ..errors import ConfigError

Parts = Mapping[int, tuple[int, int]]


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
        raise ConfigError("new_tokens.fraction", f"{fraction!r} is not in (0, 1)", "hold out a share such as 0.05")
    if strata < 1:
        raise ConfigError("new_tokens.strata", f"{strata!r} is not a positive number of bands", "use e.g. 5")
    counts = np.asarray(counts)
    eligible = np.array(sorted(t for t in parts if t < counts.size and counts[t] > 0), dtype=np.int64)
    if eligible.size < strata:
        raise ConfigError("new_tokens.fraction", f"only {eligible.size} merged tokens occur in training, fewer than "
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
