"""Shared test setup: a hermetic environment for the whole session, and the shared-data location.

Tests are arranged as the package is: tests/<subpackage>/ holds the tests of fixedcode_study/<subpackage>/
(tests/model/ those of model.py, build.py and the presets), and tests/ itself the package-wide ones
(layout, install). Test file names are unique across folders (pytest's rootdir-relative import).

Before any test module is imported (libraries read some of these at import time: huggingface_hub,
datasets, matplotlib), `pytest_configure` points every cache and config folder that the code or
its libraries write to (the token cache, W&B, Hugging Face, matplotlib, torch/inductor/triton,
XDG) into one folder under pytest's temp dir, forces W&B offline, makes the Hugging Face Hub
offline, and drops inherited W&B settings and credentials (WANDB_API_KEY, WANDB_RUN_ID, ...), so
a logged-in machine with network behaves like CI. The suite runs on pytest-xdist (`-n auto --dist
loadfile` in pyproject's addopts: one worker per physical core, one test file per worker, so a file's
module-scoped studies are trained once); each worker is one process of one thread (torch and, through
OMP_NUM_THREADS, its subprocesses), so two workers on two cores do not fight over them. A test that
needs another thread count sets it itself. `-n 0` runs the suite in one process. Subprocesses inherit the environment, so the
CLI tests share the same cache and prepare each corpus once per session. `HERMETIC_ENV` lists
what is set; test_install.py checks it. The previous environment is restored at the end.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# variable -> folder under the session's env root (created empty)
HERMETIC_DIRS = {
    "FIXEDCODE_CACHE": "fixedcode_cache",          # token caches (conf/data/*.yaml cache_dir)
    "FIXEDCODE_OUT": "outputs",                    # out_root when a test gives none (else ./outputs)
    "WANDB_DIR": "wandb",                          # runs without an explicit dir, debug-cli.log
    "WANDB_CACHE_DIR": "wandb_cache",              # ~/.cache/wandb (wandb-core logs, artifacts)
    "WANDB_CONFIG_DIR": "wandb_config",            # ~/.config/wandb (settings)
    "WANDB_DATA_DIR": "wandb_data",                # ~/.local/share/wandb (staging)
    "WANDB_ARTIFACT_DIR": "wandb_artifacts",       # ./artifacts
    "HF_HOME": "hf_home",                          # ~/.cache/huggingface (hub, token, modules)
    "HF_DATASETS_CACHE": "hf_home/datasets",       # datasets' json/arrow caches (lm-eval tasks)
    "HF_EVALUATE_CACHE": "hf_home/evaluate",
    "MPLCONFIGDIR": "matplotlib",                  # ~/.config/matplotlib, font cache
    "XDG_CACHE_HOME": "xdg_cache",                 # ~/.cache for everything else
    "XDG_CONFIG_HOME": "xdg_config",               # ~/.config
    "XDG_DATA_HOME": "xdg_data",                   # ~/.local/share
    "XDG_STATE_HOME": "xdg_state",                 # ~/.local/state
    "TORCH_HOME": "torch_home",                    # ~/.cache/torch
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",    # /tmp/torchinductor_$USER (train.compile)
    "TRITON_CACHE_DIR": "triton",                  # ~/.triton/cache
    "NUMBA_CACHE_DIR": "numba",
}
HERMETIC_VALUES = {
    "WANDB_MODE": "offline",        # explicit WANDB_MODE wins over logger.wandb.mode=auto (loggers.py)
    "WANDB_SILENT": "true",
    "HF_HUB_OFFLINE": "1",          # nothing is fetched from the Hub; tests make or ship their data
    "HF_DATASETS_OFFLINE": "1",
}
DROPPED_PREFIXES = ("WANDB_", "FIXEDCODE_")     # inherited run ids, keys, entities, data dirs
DROPPED = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "TRANSFORMERS_CACHE", "HUGGINGFACE_HUB_CACHE",
           "HF_HUB_CACHE", "HF_ASSETS_CACHE")

# one intra-op thread per xdist worker (and its subprocesses): the workers already fill the cores, and
# OpenMP threads that outnumber the cores spin-wait and run several times slower
WORKER_VALUES = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

HERMETIC_ENV: dict[str, str] = {}   # filled by pytest_configure: every variable set above
_saved: dict[str, str | None] = {}


def _env_root(config: pytest.Config) -> Path:
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's own basetemp (kept for inspection)
    if factory is not None:
        return factory.mktemp("session_env", numbered=False)
    return Path(tempfile.mkdtemp(prefix="fixedcode-session-env-"))


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin has set up the temp dir
def pytest_configure(config: pytest.Config) -> None:
    root = _env_root(config).resolve()
    for key in list(os.environ):
        if key.startswith(DROPPED_PREFIXES) or key in DROPPED:
            _saved.setdefault(key, os.environ.pop(key))
    for key, sub in HERMETIC_DIRS.items():
        path = root / sub
        path.mkdir(parents=True, exist_ok=True)
        HERMETIC_ENV[key] = str(path)
    HERMETIC_ENV.update(HERMETIC_VALUES)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        HERMETIC_ENV.update(WORKER_VALUES)
        # one token cache for all workers of this run (its builds take turns, data/prepare.py): a corpus
        # is prepared once per run, not once per worker (gutenberg's BPE and tokens: ~40 s)
        shared = root.parent.parent / "fixedcode_cache"
        shared.mkdir(exist_ok=True)
        HERMETIC_ENV["FIXEDCODE_CACHE"] = str(shared)
    HERMETIC_ENV["FIXEDCODE_TEST_ENV_ROOT"] = str(root)
    for key, value in HERMETIC_ENV.items():
        _saved.setdefault(key, os.environ.get(key))
        os.environ[key] = value
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)  # torch may have been imported (and sized its pool) before this hook


def pytest_unconfigure(config: pytest.Config) -> None:
    for key, value in _saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _saved.clear()


# The longest files of the slow tier (the documented commands, in two halves): queued first, so that under
# `--dist loadfile --no-loadscope-reorder` (.ci/run's slow step) each starts at once on its own worker and
# the other files fill in around them, instead of one of them starting last.
LONGEST_FIRST = ("test_cli_docs_run_standalone.py", "test_cli_docs_run.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in LONGEST_FIRST)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def hermetic_env() -> dict[str, str]:
    """The variables this session set (all folders lie under HERMETIC_ENV['FIXEDCODE_TEST_ENV_ROOT'])."""
    return dict(HERMETIC_ENV)


@pytest.fixture(scope="session")
def hermetic_dirs() -> list[str]:
    """The variables that name a folder (each one under the session's env root)."""
    return list(HERMETIC_DIRS)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache() -> Path:
    """The session's token cache (FIXEDCODE_CACHE), shared by in-process and CLI tests."""
    return Path(HERMETIC_ENV["FIXEDCODE_CACHE"])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def no_shared_wandb_service():
    """A test that runs W&B in this process (a WandbMirror, the analysis run) starts a W&B service and
    publishes it in os.environ["WANDB_SERVICE"]; every later CLI subprocess would inherit it and run
    its W&B run inside this process's service, which a test's SIGKILL of the job cannot reach (the
    next attempt then finds its run id "in use"). Each test ends with that service shut down."""
    yield
    if os.environ.get("WANDB_SERVICE"):
        import wandb

        wandb.teardown()
        os.environ.pop("WANDB_SERVICE", None)
