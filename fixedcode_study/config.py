"""Hydra plumbing shared by the entry points: where conf/ lives and the custom resolvers."""

from __future__ import annotations

import hashlib
from pathlib import Path

from omegaconf import OmegaConf

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def job_key(override_dirname: str) -> str:
    """Directory name of a job: its sorted overrides (`input=gf2,seed=1`), 'defaults' when none.

    Keyed by the override set rather than a timestamp or job number, so re-running a sweep finds
    the same directories. Long or path-like keys get a readable prefix plus a hash.
    """
    if not override_dirname:
        return "defaults"
    safe = override_dirname.replace("/", "_").replace("\\", "_")
    if len(safe) <= 120 and safe == override_dirname:
        return safe
    digest = hashlib.sha256(override_dirname.encode()).hexdigest()[:10]
    return f"{safe[:100]}-{digest}"


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("job_key"):
        OmegaConf.register_new_resolver("job_key", job_key)


register_resolvers()
