"""Name each job's input variant so that jobs differing only by seed share one table row.

A variant is the input name (results.json "input") plus those ``input_props`` that vary
between jobs of that input, e.g. ``gf2 (code_width=24)`` in a code-width sweep. Props that
do not define a design choice are never used to split rows:
- derived facts of the code (hash, rank, injectivity, tiling, draws, measured RMS) - consequences;
- props fixed by the comparison context (vocab_size, d_model follow the model preset and data),
  except the key design props code_width and scale, which are always shown when they vary;
- props that move one-to-one with the seed (e.g. matrix_seed = seed) - seed-like by design;
- props fully determined by a prop already in the label (e.g. tile_factor by code_width).
Optimizer settings a tuning sweep varies (optim.lr, optim.warmup_*: TUNED_PREFIXES) also name a
variant when they vary within one input, e.g. ``gf2 (lr=0.001)``; ``arm`` is the label without
them (the arm a learning-rate selection picks the best of). The output head (``output``, results.json
"output") names every variant when more than one head was run, e.g. ``binary16 (output=bitchain)``;
the untied head, the paper's and the default, sorts first within an input and so is its plain variant.

Order (``variant_order``) follows meaning, not the alphabet: the learned baseline, then the
fixed codes, then controls by family (FAMILIES), unknown inputs last; within an input, by the
numeric value of the labelling props.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ...record.variants import DEFAULT_OUTPUT, OUTPUT, is_missing, format_value, variant_label

LEARNED = "learned"
PROP_PREFIX = "input_props."
TUNED_PREFIXES = ("optim.lr", "optim.warmup")
# Input configs (conf/input/) by family, in reading order (the controls study's: references, what the
# code is made of, what the learned side gets, what saved parameters and compute buy). Figures draw
# one panel per family when a context has many arms, and use the family for line styles.
FAMILIES: list[tuple[str, tuple[str, ...]]] = [
    ("baseline", (LEARNED,)),
    ("fixed code", ("binary16", "gf2", "binary", "wide", "binary16_scaled")),
    ("code control", ("binary16_permuted", "gaussian16", "random_fixed", "wide_random")),
    ("learned-table control", ("frozen_learned", "frozen_codestats", "learned_lowdim", "learned_codestats")),
    ("size/compute-matched", ("binary16_sizematched", "gf2_sizematched", "binary16_sizematched_isoflop",
                              "gf2_sizematched_isoflop")),
]
OTHER_FAMILY = "other"


def family_of(input_name: str) -> str:
    for family, names in FAMILIES:
        if input_name in names:
            return family
    return OTHER_FAMILY


def family_rank(input_name: str) -> tuple[int, int]:
    """(family position, position within the family); unknown inputs after every known one."""
    for i, (_, names) in enumerate(FAMILIES):
        if input_name in names:
            return i, names.index(input_name)
    return len(FAMILIES), 0
DERIVED_PROPS = {"matrix_sha256", "gf2_rank", "injective", "truncated", "minimal_code_width", "full_tiles",
                 "matrix_draws", "min_row_weight", "min_col_weight", "input_rms", "code_sha256",
                 # measured statistics of the code (the code-property table shows them)
                 "nonconstant_bits", "constant_bits", "bit_entropy_mean", "bit_entropy_min", "hamming_mean",
                 "hamming_min", "code_rms"}
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


# Reading order of the heads (conf/output): the paper's, the token-specific alternative, then the
# table-free heads from the one that keeps a projection to the exact chain; unknown heads after.
OUTPUT_ORDER = ("untied", "tied", "fixed", "fixed_gaussian", "bitchain", "bitchain_gf2")


def _output_key(value) -> tuple:
    name = str(value)
    return (0, float(OUTPUT_ORDER.index(name)), "") if name in OUTPUT_ORDER else (1, 0.0, name)


def output_columns_for(jobs: pd.DataFrame) -> list[str]:
    """["output"] when the jobs ran with more than one output head, else []. Decided over all the
    jobs read, not per input: in a study where gf2 ran only with the bit chain, "gf2" alone would
    read as the paper's gf2 arm (untied head)."""
    return [OUTPUT] if OUTPUT in jobs and _hashable(jobs[OUTPUT]).nunique() > 1 else []


def tuned_columns_for(jobs: pd.DataFrame) -> list[str]:
    """Tuning settings (job columns from the config) that take more than one value in ``jobs``."""
    return [c for c in jobs.columns if c.startswith(TUNED_PREFIXES) and _hashable(jobs[c]).nunique() > 1]


def _sort_key(value):
    """Absent props first (the plain variant, which is also the one a comparison takes as the
    baseline), then numbers numerically (code_width 8 < 16 < 32), then text."""
    if is_missing(value):
        return (-1, 0.0, "")
    if isinstance(value, (int, float)):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def assign_variants(jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Add ``variant`` (label), ``arm`` (label without tuning settings), ``family`` and
    ``variant_order`` (baseline, fixed codes, controls by family; then props numerically).
    ``label_props`` maps each input to its labelling columns (input props, then tuning settings)."""
    jobs = jobs.copy()
    jobs["input"] = jobs["input"].astype(object).where(jobs["input"].notna(), "<unknown>")
    label_props: dict[str, list[str]] = {}
    labels = pd.Series(index=jobs.index, dtype=object)
    arms = pd.Series(index=jobs.index, dtype=object)
    order_keys = {}
    if OUTPUT in jobs:  # a job without a record (crashed before results.json) ran the default head too
        jobs[OUTPUT] = jobs[OUTPUT].astype(object).where(jobs[OUTPUT].notna(), DEFAULT_OUTPUT)
    heads = output_columns_for(jobs)
    for input_name, group in jobs.groupby("input", sort=False):
        props = label_props_for(group) + heads
        tuned = tuned_columns_for(group)
        label_props[input_name] = props + tuned
        for idx, row in group.iterrows():
            labels[idx] = variant_label(input_name, row, props + tuned)
            arms[idx] = variant_label(input_name, row, props)
            order_keys[labels[idx]] = (family_rank(input_name), input_name,
                                       tuple(_output_key(row[p]) if p == OUTPUT else _sort_key(row[p])
                                             for p in props + tuned))
    jobs["variant"] = labels.astype(str)
    jobs["arm"] = arms.astype(str)
    jobs["family"] = jobs["input"].map(family_of)
    ranked = sorted(order_keys, key=order_keys.get)
    jobs["variant_order"] = jobs["variant"].map({v: i for i, v in enumerate(ranked)})
    return jobs, label_props
