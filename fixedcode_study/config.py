"""Hydra plumbing shared by the entry points: where conf/ lives and the custom resolvers."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def _override_key(line: str) -> str:
    """`+train.x=1` -> `train.x`; `hydra/launcher=slurm_gpu` -> `hydra/launcher`."""
    return line.split("=", 1)[0].lstrip("+~")


def job_key(overrides: Sequence[str] | str, ignore: Sequence[str] = ()) -> str:
    """Directory name of a job: its sorted overrides (`input=gf2,seed=1`), 'defaults' when none.

    Keyed by the override set rather than a timestamp or job number, so re-running a sweep finds
    the same directories. Overrides that do not change what a job computes are dropped: every key
    equal to an `ignore` entry or below it (`eval` drops `eval=paper` and `eval.limit=5`;
    `hydra` drops `hydra/launcher=...`), so adding them to a finished job never retrains it.
    Long or path-like keys get a readable prefix plus a hash.
    """
    if isinstance(overrides, str):  # already joined (Hydra's override_dirname)
        overrides = [overrides] if overrides else []
    prefixes = tuple(str(p) for p in ignore)
    kept = sorted(
        str(line) for line in overrides
        if not any(_override_key(str(line)) == p or _override_key(str(line)).startswith((p + ".", p + "/"))
                   for p in prefixes)
    )
    joined = ",".join(kept)
    if not joined:
        return "defaults"
    safe = joined.replace("/", "_").replace("\\", "_")
    if len(safe) <= 120 and safe == joined:
        return safe
    digest = hashlib.sha256(joined.encode()).hexdigest()[:10]
    return f"{safe[:100]}-{digest}"


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("job_key"):
        OmegaConf.register_new_resolver("job_key", job_key)


register_resolvers()
