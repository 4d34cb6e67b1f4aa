"""The output heads of a study (one row per variant), when any job ran a head other than untied.

Read from results.json ``output_props`` (heads package: type, code, code_width, logit_rank_bound)
and ``params`` (head_trainable, token_specific_trainable), one run per (context, variant): these are
properties of the model, identical across seeds. The row says what a reader needs to weigh a
table-free head's number: how many parameters it has, whether any is token-specific, and the rank
its logits are confined to (the softmax bottleneck).
"""

from __future__ import annotations

import math

from ..stats.grouping import context_columns, shown_context
from .code import MISSING, first_per_variant
from .render import Table

COLUMNS = [("output", "head", "text"), ("output_props.code", "head code", "text"),
           ("output_props.code_width", "code width K", "int"), ("output_props.logit_rank_bound", "logit rank ≤", "int"),
           ("params.head_trainable", "head-trainable", "int"),
           ("params.token_specific_trainable", "token-specific trainable", "int"),
           ("flops_per_token", "FLOPs/token", "sci")]


def _cell(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if kind == "text":
        return str(value)
    number = float(value)
    return f"{number:,.0f}" if kind == "int" else f"{number:.3e}"


def heads_table(study) -> Table | None:
    jobs = study.included_jobs
    if "output" not in jobs or not (jobs["output"] != "untied").any():
        return None
    rows_df = first_per_variant(study)
    shown = shown_context(study.jobs)
    columns = shown + ["input variant"] + [title for _, title, _ in COLUMNS]
    rows = [[str(r[c]) for c in shown] + [r["variant"]] + [_cell(r.get(c), kind) for c, _, kind in COLUMNS]
            for r in rows_df.to_dict("records")]
    keep = ["run"] + context_columns(study.jobs) + ["variant"] + [c for c, _, _ in COLUMNS if c in rows_df]
    caption = ("Output head of each variant, from the record's output_props and params of one run per variant. "
               "untied: a trainable V x d_model matrix; tied: the learned input table is the head (it owns no "
               "parameter); fixed: logits = C (P h) with C a fixed V x K code and P trainable (K x d_model), so "
               "every context's logits lie in a rank ≤ K subspace fixed before training (the softmax bottleneck); "
               "bitchain: p(v | h) = Π_k p(b_k(v) | b_<k(v), h) over the code's bits, exactly normalised over the V "
               f"valid IDs, with no rank bound of that form ({MISSING}). Token-specific: trainable parameters in "
               "tensors with a dimension of size V (an input table or an untied head).")
    numeric = set(range(len(shown) + 3, len(columns)))
    return Table("output_heads", caption, columns, rows, rows_df[[c for c in keep if c in rows_df]], set(), numeric)
