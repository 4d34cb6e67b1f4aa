"""lm-eval's own HFLM with the workbench adapter's rule for continuations longer than the context.

HFLM cuts a too-long context+continuation from the left, as the adapter (lm.py) does, but asserts
that the continuation alone fits the context: a PIQA solution of 182 tokens stops a whole suite on
a model trained at 128 positions. The adapter scores such a continuation on its last max_length
tokens. Moving the clipped head of the continuation into the context makes HFLM compute exactly
that, with its own code from there on: the token sequence (context + continuation) is the same, so
the left cut, the batching and the grouping of shared prefixes are unchanged, and the scored span is
the continuation's last max_length tokens, each conditioned on the tokens before it in the window.
`evaluate hf=` uses this class; both paths state the rule in the record (`context`).
"""

from __future__ import annotations

import logging
from typing import Any

from lm_eval.models.huggingface import HFLM

from ..spec.evaluation import CONTEXT_RULE

log = logging.getLogger(__name__)

__all__ = ["ContextClippedHFLM", "CONTEXT_RULE"]


class ContextClippedHFLM(HFLM):
    """HFLM whose loglikelihood requests follow CONTEXT_RULE instead of asserting."""

    def _loglikelihood_tokens(self, requests: list[tuple[Any, list[int], list[int]]], disable_tqdm: bool = False,
                              override_bs: int | None = None) -> list[tuple[float, bool]]:
        n = self.max_length
        clipped = [(key, ctx + cont[:-n], cont[-n:]) if len(cont) > n else (key, ctx, cont)
                   for key, ctx, cont in requests]
        long = sum(len(cont) > n for _, _, cont in requests)
        if long:
            log.warning("fixedcode: %d continuations longer than the context (%d tokens) are scored on their "
                        "last %d tokens only", long, n, n)
        return super()._loglikelihood_tokens(clipped, disable_tqdm=disable_tqdm, override_bs=override_bs)
