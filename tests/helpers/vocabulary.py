"""Token strings for inputs that spell (`vocabulary: data`) outside a job.

A job resolves `vocabulary: data` from its own tokenizer (spec/vocabulary.py). Tests that build an
input from conf/ without a job give it a synthetic vocabulary instead: distinct lower-case strings,
so a test need not prepare a corpus to build every variant.
"""

from __future__ import annotations

import string
from typing import Any, Mapping

from fixedcode_study.spec.vocabulary import _replace, needs_vocabulary


def synthetic_vocabulary(vocab_size: int) -> list[str]:
    """V distinct strings: the base-26 spelling of each ID ('a', 'b', ..., 'ba', ...)."""
    letters = string.ascii_lowercase
    words = []
    for i in range(vocab_size):
        word = ""
        while True:
            word = letters[i % 26] + word
            i //= 26
            if i == 0:
                break
        words.append(word)
    return words


def with_vocabulary(input_cfg: Mapping[str, Any], vocab_size: int) -> dict[str, Any]:
    """The input settings with `vocabulary: data` replaced by the synthetic vocabulary."""
    cfg = dict(input_cfg)
    return _replace(cfg, synthetic_vocabulary(vocab_size)) if needs_vocabulary(cfg) else cfg
