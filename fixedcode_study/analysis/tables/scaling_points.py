"""The points the scaling fits are asked about: the paper's model and the earlier version's, with their
parameter counts under both conventions, training tokens and training FLOPs, and the paper's
measured WikiText gap converted to bits per byte. Published or assumed numbers, never produced here;
every count below follows from the stated shape (tests/analysis/test_analysis_scaling.py recomputes them with
accounting's functions, and the paper's against the issue's totals and conf/model/paper_1p7b.yaml).

Counts are accounting's (fixedcode_study/accounting.py) on the stated shape, written out as numbers:
a block is attention (q, k, v, o) + MLP + two norm scales, the body the blocks and the final norm;
FLOPs per token are PaLM's 6 N + 12 L H d_head T, N = block projections + untied head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .reference import PAPER, read_references

# WikiText-2 (raw) test split as lm-eval's `wikitext` task counts it (lm_eval/tasks/wikitext/
# preprocess_wikitext.py, process_results): per page of EleutherAI/wikitext_document_level
# wikitext-2-raw-v1 test, words = len(re.split(r"\s+", page)) and bytes = len(page.encode("utf-8")),
# both on the page before detokenisation, summed over the 62 pages. Computed from
# ../shared/data/eval/wikitext/test.jsonl (see ../shared/data/SOURCES.md; it states the same two
# totals); tests/analysis/test_analysis_scaling.py recomputes them when that folder exists.
WIKITEXT_WORDS = 241_335
WIKITEXT_BYTES = 1_290_527
WIKITEXT_WORDS_PER_BYTE = WIKITEXT_WORDS / WIKITEXT_BYTES   # 0.18700...


def wikitext_bpb(word_perplexity: float) -> float:
    """lm-eval's WikiText bits per byte from its word perplexity: both divide the same summed
    log-likelihood, by words (then exp) or by bytes x ln 2, so bpb = ln(word_ppl) x words / (bytes ln 2)."""
    return math.log(word_perplexity) * WIKITEXT_WORDS_PER_BYTE / math.log(2)


@dataclass(frozen=True)
class Shape:
    """A model's shape and the counts that follow from it. The counts are stated numbers, not computed
    here: the analysis runs without torch (so without accounting), and accounting owns the formulas;
    tests/analysis/test_analysis_scaling.py recomputes each with accounting's functions from the shape."""
    n_layer: int
    d_model: int
    n_head: int
    d_ff: int
    vocab_size: int
    seq_len: int
    mlp: str               # "swiglu" (3 d d_ff) or "gelu" (2 d d_ff)
    body: int              # accounting.body_params: blocks (attention, MLP, 2 norm scales) + final norm
    flops_per_token: int   # accounting.flops_per_token(...)["total"] at seq_len, untied head

    @property
    def table(self) -> int:
        return self.vocab_size * self.d_model   # the learned input table; the untied head is the same size


@dataclass(frozen=True)
class Point:
    key: str
    label: str
    shape: Shape
    tokens: float
    arms: tuple[str, ...]      # the fixed codes it ran against learned
    source: str
    assumed: str               # what is not from the source, in words ("" = nothing)

    def params(self, convention: str, learned: bool) -> int:
        """chinchilla: every trained parameter (body + head, + the table when learned); kaplan: the body."""
        if convention == "kaplan":
            return self.shape.body
        return self.shape.body + self.shape.table + (self.shape.table if learned else 0)

    @property
    def compute(self) -> float:
        return float(self.shape.flops_per_token) * self.tokens


PAPER_POINT = Point(
    "paper", "the paper (SmolLM2-1.7B shape)",
    # HuggingFaceTB/SmolLM2-1.7B config.json (conf/model/paper_1p7b.yaml): 24 layers, d 2,048, 32 heads,
    # SwiGLU d_ff 8,192, V 49,152, context 2,048; untied head; 1e11 training tokens (issue 25)
    # body 24 x (4 x 2048^2 + 3 x 2048 x 8192 + 2 x 2048) + 2048; FLOPs 6 x (24 x 67,108,864 + 49,152 x 2048)
    # + 12 x 24 x 32 x 64 x 2048
    Shape(n_layer=24, d_model=2048, n_head=32, d_ff=8192, vocab_size=49_152, seq_len=2048, mlp="swiglu",
          body=1_610_713_088, flops_per_token=11_475_615_744),
    1e11, ("binary16", "gf2"), "the fixed-code paper (issue 25; conf/model/paper_1p7b.yaml)", "")

# The earlier version (issue 25): 32 layers, d_model 1,024, GELU MLP, V = 65,536, affine GF(2) recoding,
# three seeds, gap inside seed noise. Not stated there, so ASSUMED here (explicit, not the paper_v1
# preset): d_ff 4,096 (the usual 4 d for a GELU MLP), 16 heads (head_dim 64), context 2,048, an untied
# head, and 1e10 training tokens (about 20 per parameter of its learned model, Chinchilla-optimal).
EARLIER_POINT = Point(
    "earlier", "the earlier version (32 x 1,024, GELU)",
    # body 32 x (4 x 1024^2 + 2 x 1024 x 4096 + 2 x 1024) + 1024; FLOPs 6 x (32 x 12,582,912 + 65,536 x 1024)
    # + 12 x 32 x 16 x 64 x 2048
    Shape(n_layer=32, d_model=1024, n_head=16, d_ff=4096, vocab_size=65_536, seq_len=2048, mlp="gelu",
          body=402_719_744, flops_per_token=3_623_878_656),
    1e10, ("gf2",), "the earlier version of the paper (issue 25)",
    "assumed: d_ff 4,096, 16 heads, context 2,048, untied head, 1e10 training tokens")

POINTS = (PAPER_POINT, EARLIER_POINT)
WIKITEXT_METRIC = "wikitext/word_perplexity"


def paper_wikitext_gaps() -> dict[str, dict[str, float]]:
    """The paper's measured WikiText word perplexities (reference_results.csv) as bpb, and each fixed
    code's gap to learned: {variant: {word_ppl, bpb, gap_bpb}}. WikiText, not our validation text."""
    refs = read_references()
    rows = refs[(refs["source"] == PAPER) & (refs["lm_eval_metric"] == WIKITEXT_METRIC)]
    out = {r.variant: {"word_ppl": float(r.low), "bpb": wikitext_bpb(float(r.low))} for r in rows.itertuples()}
    base = out.get("learned", {}).get("bpb", math.nan)
    for values in out.values():
        values["gap_bpb"] = values["bpb"] - base
    return out
