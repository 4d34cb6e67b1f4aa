"""Shared test setup: an isolated data cache per test session, and the shared-data location."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Point the token cache (and W&B) away from the user's home for the whole session.

    Subprocesses inherit the environment, so the CLI tests share the same cache and prepare each
    corpus once per session.
    """
    cache = tmp_path_factory.mktemp("fixedcode_cache")
    old = {k: os.environ.get(k) for k in ("FIXEDCODE_CACHE", "WANDB_SILENT", "WANDB_MODE")}
    os.environ["FIXEDCODE_CACHE"] = str(cache)
    os.environ["WANDB_SILENT"] = "true"
    os.environ.pop("WANDB_MODE", None)  # let the app decide (offline here: no key, no network)
    yield cache
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA
