"""Name each job's input variant so that jobs differing only by seed share one table row.

A variant is the input name (results.json "input") plus those ``input_props`` that vary
between jobs of that input, e.g. ``gf2 (code_width=24)`` in a code-width sweep. Props that
do not define a design choice are never used to split rows:
- derived facts of the code (hash, rank, injectivity, tiling, draws, measured RMS) - consequences;
- props fixed by the comparison context (vocab_size, d_model follow the model preset and data),
  except the key design props code_width and scale, which are always shown when they vary;
- props that move one-to-one with the seed (e.g. matrix_seed = seed) - seed-like by design;
- props fully determined by a prop already in the label (e.g. tile_factor by code_width).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

LEARNED = "learned"
PROP_PREFIX = "input_props."
DERIVED_PROPS = {"matrix_sha256", "gf2_rank", "injective", "truncated", "minimal_code_width", "full_tiles",
                 "matrix_draws", "min_row_weight", "min_col_weight", "input_rms"}
KEY_DESIGN_PROPS = {"code_width", "scale"}
CONTEXT = ["model", "data"]


def _hashable(series: pd.Series) -> pd.Series:
    """Comparable text for any prop value (numbers, strings, JSON lists, NaN)."""
    return series.map(lambda v: "<missing>" if v is None or (isinstance(v, float) and np.isnan(v))
                      else json.dumps(v, sort_keys=True, default=str))


def _is_seed_like(jobs: pd.DataFrame, prop: str) -> bool:
    keyed = pd.DataFrame({"seed": _hashable(jobs["seed"]), "p": _hashable(jobs[prop])})
    return (keyed.groupby("seed")["p"].nunique().max() == 1
            and keyed.groupby("p")["seed"].nunique().max() == 1)


def _determined_by(jobs: pd.DataFrame, prop: str, chosen: list[str]) -> bool:
    if not chosen:
        return False
    keyed = pd.DataFrame({c: _hashable(jobs[c]) for c in chosen + [prop]})
    return keyed.groupby(chosen)[prop].nunique().max() <= 1


def label_props_for(jobs: pd.DataFrame) -> list[str]:
    """Props (column names) that distinguish variants within the jobs of one input name."""
    chosen: list[str] = []
    for col in [c for c in jobs.columns if c.startswith(PROP_PREFIX)]:
        name = col[len(PROP_PREFIX):]
        if name in DERIVED_PROPS or "." in name or _hashable(jobs[col]).nunique() < 2:
            continue
        if name not in KEY_DESIGN_PROPS and _determined_by(jobs, col, [c for c in CONTEXT if c in jobs]):
            continue
        if _is_seed_like(jobs, col) or _determined_by(jobs, col, chosen):
            continue
        chosen.append(col)
    return chosen


def format_value(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def variant_label(input_name: str, row: pd.Series, props: list[str]) -> str:
    if not props:
        return input_name
    parts = [f"{p[len(PROP_PREFIX):]}={format_value(row[p])}" for p in props]
    return f"{input_name} ({', '.join(parts)})"


def _sort_key(value):
    """Numbers before text, numerically; so code_width 8 < 16 < 32 in row order."""
    if isinstance(value, (int, float)) and not (isinstance(value, float) and np.isnan(value)):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def assign_variants(jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Add ``variant`` (label) and ``variant_order`` (learned first, then by input and props)."""
    jobs = jobs.copy()
    jobs["input"] = jobs["input"].astype(object).where(jobs["input"].notna(), "<unknown>")
    label_props: dict[str, list[str]] = {}
    labels = pd.Series(index=jobs.index, dtype=object)
    order_keys = {}
    for input_name, group in jobs.groupby("input", sort=False):
        props = label_props_for(group)
        label_props[input_name] = props
        for idx, row in group.iterrows():
            labels[idx] = variant_label(input_name, row, props)
            order_keys[labels[idx]] = (input_name != LEARNED, input_name,
                                       tuple(_sort_key(row[p]) for p in props))
    jobs["variant"] = labels.astype(str)
    ranked = sorted(order_keys, key=order_keys.get)
    jobs["variant_order"] = jobs["variant"].map({v: i for i, v in enumerate(ranked)})
    return jobs, label_props
