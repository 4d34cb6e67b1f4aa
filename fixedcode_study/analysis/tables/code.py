"""Code properties per variant (what each input code looks like) and the constant-bit warning.

Read from results.json ``input_props`` (written by the training side: nonconstant_bits,
constant_bits, bit_entropy_mean/min, hamming_min/mean, code_rms, code_width) and
``flops_per_token``, taking one run per (context, variant): these are properties of the code and
model, identical across seeds. A missing key shows as "—".
"""

from __future__ import annotations

import json
import math

import pandas as pd

from ..stats.grouping import context_columns, shown_context, sort_rows
from .render import Table

PROPS = [("input_props.code_width", "code width", "int"),
         ("input_props.nonconstant_bits", "non-constant bits", "int"),
         ("input_props.constant_bits", "constant bits", "bits"),
         ("input_props.bit_entropy_mean", "bit entropy mean (bits)", "float"),
         ("input_props.bit_entropy_min", "bit entropy min (bits)", "float"),
         ("input_props.hamming_min", "Hamming min", "float"),
         ("input_props.hamming_mean", "Hamming mean", "float"),
         ("input_props.code_rms", "code RMS", "float"),
         ("flops_per_token", "FLOPs/token", "sci")]
MISSING = "—"


def bit_list(value) -> list[int] | None:
    """constant_bits as stored (a list, or JSON text after flattening) -> ints; None when absent."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, (list, tuple)):
        return None
    return sorted(int(v) for v in value)


def bit_ranges(bits: list[int]) -> str:
    """[12, 13, 14, 15, 20] -> '12–15, 20'."""
    parts, start = [], None
    for i, bit in enumerate(bits):
        if start is None:
            start = bit
        if i + 1 == len(bits) or bits[i + 1] != bit + 1:
            parts.append(str(start) if start == bit else f"{start}–{bit}")
            start = None
    return ", ".join(parts)


def _cell(value, kind: str) -> str:
    if kind == "bits":
        bits = bit_list(value)
        if bits is None:
            return MISSING
        return "none" if not bits else f"{len(bits)} ({bit_ranges(bits)})"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if kind == "int":
        return f"{number:,.0f}"
    if kind == "sci":
        return f"{number:.3e}"
    return f"{number:.4g}"


def first_per_variant(study) -> pd.DataFrame:
    jobs = study.included_jobs.sort_values("run")
    context = context_columns(study.jobs)
    return sort_rows(jobs.drop_duplicates(context + ["variant"], keep="first"), study.jobs)


def code_table(study) -> Table | None:
    rows_df = first_per_variant(study)
    present = [(c, title, kind) for c, title, kind in PROPS if c in rows_df and rows_df[c].notna().any()]
    if not any(c.startswith("input_props.") and c != "input_props.code_width" for c, _, _ in present):
        return None  # older records: nothing beyond the code width, already in the labels
    shown = shown_context(study.jobs)
    columns = shown + ["input variant"] + [title for _, title, _ in PROPS]
    rows = [[str(r[c]) for c in shown] + [r["variant"]] + [_cell(r.get(c), kind) for c, _, kind in PROPS]
            for r in rows_df.to_dict("records")]
    keep = ["run"] + context_columns(study.jobs) + ["variant"] + [c for c, _, _ in PROPS if c in rows_df]
    caption = ("Properties of each input code, from results.json input_props of one run per variant (they do not "
               "depend on the seed). Constant bits: code positions equal for every token ID, which carry no "
               "information; bit entropy in bits per code position (1 = balanced); Hamming distances between the "
               "codes of distinct token IDs; code RMS: root mean square of the input vectors; FLOPs/token: "
               f"training FLOPs per token. {MISSING}: not recorded (learned tables have no code).")
    numeric = set(range(len(shown) + 1, len(columns)))
    return Table("code_properties", caption, columns, rows, rows_df[keep], set(), numeric)


def constant_bit_warnings(study) -> list[str]:
    """One line per variant and set of constant bits, naming every context where its code has them."""
    column = "input_props.constant_bits"
    if column not in study.included_jobs:
        return []
    context = context_columns(study.jobs)
    found: dict[tuple, list[str]] = {}
    for r in first_per_variant(study).to_dict("records"):
        bits = bit_list(r.get(column))
        if not bits:
            continue
        vocab = r.get("input_props.vocab_size", r.get("data.vocab_size"))
        at = f" at V={int(vocab):,}" if isinstance(vocab, (int, float)) and not math.isnan(vocab) else ""
        found.setdefault((r["variant"], tuple(bits), at), []).append(", ".join(f"{c}={r[c]}" for c in context))
    lines = []
    for (variant, bits, at), where in found.items():
        shown = where[0] if len(where) == 1 else f"{len(where)} contexts: {'; '.join(where)}"
        lines.append(f"**{variant}** ({shown}) has {len(bits)} constant input bit{'s' * (len(bits) > 1)} "
                     f"({bit_ranges(list(bits))}){at}: the same value for every token, so they carry no information "
                     "and the code is effectively narrower than its width.")
    return lines
