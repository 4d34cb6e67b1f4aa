"""Model shapes and token budgets as comparison contexts (a compute ladder, issue 25).

Rows are compared within a model preset (stats/grouping.py). A ladder runs the same arm at the same
seed at several sizes (presets, or one preset with `model.d_model=...` overrides) and several token
budgets (`train.tokens`); by preset name alone those jobs would look like repeats of one seed and be
counted once. So when an arm (input, head) at one seed ran under more than one value of a model
setting or of train.tokens within one preset and data set, that setting names the context:
`model` becomes e.g. `test_micro (d_model=64) @ 2^14 tokens`. Nothing changes for other studies:
their arms run once per seed, and an isoflop arm's shorter training is not a different
train.tokens (its budget is derived at build time).

Columns added to every job: `model_preset` (the preset name), `model_size` (the preset plus the
shape settings that split it), `train_budget` (config train.tokens, NaN when not recorded).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

BUDGET_KEY = "train.tokens"
SHAPE_PREFIX = "model."
NOT_SHAPE = {"model.name", "model.source"}
ARM = ["data", "input", "output", "seed"]


def _text(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def tokens_label(tokens: float) -> str:
    """2^21 for a power of two (a ladder's budgets usually are), else 3,000,000."""
    try:
        tokens = float(tokens)
    except (TypeError, ValueError):
        return "? tokens"
    if not (math.isfinite(tokens) and tokens > 0):
        return "? tokens"
    exponent = math.log2(tokens)
    return f"2^{round(exponent)} tokens" if exponent.is_integer() else f"{round(tokens):,} tokens"


def _splitting_keys(group: pd.DataFrame, configs: dict[str, dict]) -> list[str]:
    """Settings (shape or budget) that take more than one value for one arm at one seed."""
    flat = {run: configs.get(run, {}) for run in group["run"]}
    keys = sorted({k for f in flat.values() for k in f
                   if (k.startswith(SHAPE_PREFIX) and k not in NOT_SHAPE) or k == BUDGET_KEY})
    arm = [c for c in ARM if c in group]
    split = []
    for key in keys:
        values = group["run"].map(lambda run, key=key: _text(flat[run].get(key)))
        if values.groupby([group[c].astype(str) for c in arm]).nunique().max() > 1:
            split.append(key)
    return split


def split_contexts(jobs: pd.DataFrame, configs: dict[str, dict]) -> tuple[pd.DataFrame, list[str]]:
    """Add model_preset / model_size / train_budget and rename `model` where shapes or budgets split it."""
    jobs = jobs.copy()
    jobs["model_preset"] = jobs["model"]
    budget = jobs["run"].map(lambda run: (configs.get(run) or {}).get(BUDGET_KEY))
    jobs["train_budget"] = pd.to_numeric(budget, errors="coerce")
    jobs["model_size"] = jobs["model"]
    notes, split = [], {}
    for preset, group in jobs.groupby("model", sort=False, dropna=False):
        keys = _splitting_keys(group, configs)
        if not keys:
            continue
        shape = [k for k in keys if k != BUDGET_KEY]
        for idx, run in group["run"].items():
            flat = configs.get(run, {})
            size = preset + (f" ({', '.join(f'{k[len(SHAPE_PREFIX):]}={flat.get(k)}' for k in shape)})"
                             if shape else "")
            jobs.loc[idx, "model_size"] = size
            jobs.loc[idx, "model"] = size + (f" @ {tokens_label(jobs.loc[idx, 'train_budget'])}"
                                             if BUDGET_KEY in keys else "")
        named = [k[len(SHAPE_PREFIX):] for k in shape] + (["training tokens"] if BUDGET_KEY in keys else [])
        split.setdefault(", ".join(named), []).append(preset)
    for named, presets in split.items():   # one note per kind of split, naming every preset it split
        notes.append(f"model {', '.join(presets)}: {'its' if len(presets) == 1 else 'their'} jobs ran one arm at one "
                     f"seed under several values of {named}, so each value is a comparison context of its own "
                     "(the model column)")
    return jobs, notes


def _natural(text) -> tuple:
    """ladder_d48 before ladder_d128: digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))


def ladder_order(jobs: pd.DataFrame) -> pd.DataFrame:
    """Jobs by size, then budget: every table lists a ladder's contexts in that order.

    Contexts appear in the order of their first job, and run directories sort by name, where
    train.tokens=524288 comes after 4194304; a stable sort keeps the order within a context.
    """
    size = jobs["model_size"].map(_natural)
    ranks = {t: i for i, t in enumerate(sorted(set(size)))}
    key = pd.DataFrame({"size": size.map(ranks), "budget": jobs["train_budget"]}, index=jobs.index)
    return jobs.loc[key.sort_values(["size", "budget"], kind="stable", na_position="last").index].reset_index(drop=True)


def epochs(jobs: pd.DataFrame) -> pd.Series:
    """Passes over the training split per job: tokens_seen / data.train_tokens."""
    nan = pd.Series(np.nan, index=jobs.index)
    seen = pd.to_numeric(jobs["tokens_seen"] if "tokens_seen" in jobs else nan, errors="coerce")
    split = pd.to_numeric(jobs["data.train_tokens"] if "data.train_tokens" in jobs else nan, errors="coerce")
    return seen / split.where(split > 0, np.nan)
