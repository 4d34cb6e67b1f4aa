"""Installs as users install: the wheel carries conf/ and sweeps/, config.py finds them in a checkout
and in an installed wheel, and the test session itself is hermetic (W&B offline, caches in tmp)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixedcode_study import config

REPO = Path(__file__).resolve().parents[1]
PKG = "fixedcode_study"
# top-level names never copied into the build tree: outputs, caches, build products, non-package folders
SKIP_TOP = {".git", "build", "dist", "outputs", "multirun", "reports", "wandb", "lightning_logs", "tests", "docs",
            "benchmarks", ".benchmarks"}


def clean_env(**extra: str) -> dict[str, str]:
    """The session's environment without anything that would import the checkout instead of the wheel."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(extra)
    return env


def repo_files(folder: str, pattern: str) -> list[str]:
    return sorted(p.relative_to(REPO / folder).as_posix() for p in (REPO / folder).rglob(pattern) if p.is_file())


def setuptools_major() -> int:
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


def build_wheel(dest: Path) -> Path:
    """`pip wheel .` on a copy of the source tree (no build/ left in, or read from, the shared checkout)."""
    src = dest / "src"

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder).resolve() == REPO
        return {n for n in names if (top and n in SKIP_TOP) or n == "__pycache__" or n.endswith((".egg-info", "_cache"))
                or n in (".pytest_cache", ".ruff_cache", ".mypy_cache")}

    shutil.copytree(REPO, src, ignore=ignore)
    # offline with the installed setuptools when it is new enough (pyproject.toml: setuptools>=68), else
    # in pip's isolated build env (fetches setuptools), as `pip install .` does
    offline = ["--no-build-isolation", "--no-index"] if setuptools_major() >= 68 else []
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q",
                           "-w", str(dest / "dist"), str(src)],
                          capture_output=True, text=True, env=clean_env(), cwd=dest, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    wheels = list((dest / "dist").glob("fixedcode_study-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


# --- config.py: where conf/ and sweeps/ are found -------------------------------------------------------------

def test_config_and_sweeps_dirs_resolve_to_existing_folders():
    conf, sweeps = Path(config.CONFIG_DIR), Path(config.SWEEPS_DIR)
    assert (conf / "config.yaml").is_file() and (sweeps / "main.yaml").is_file()
    assert conf.is_absolute() and sweeps.is_absolute()
    # a checkout / editable install finds them beside the package, an installed wheel inside it
    assert conf in (config.PACKAGE_DIR / "conf", config.PROJECT_ROOT / "conf")
    assert sweeps in (config.PACKAGE_DIR / "sweeps", config.PROJECT_ROOT / "sweeps")
    if Path(config.__file__).resolve().parent == REPO / PKG:  # running from this checkout
        assert conf == REPO / "conf" and sweeps == REPO / "sweeps"
    for group in ("input", "model", "data", "trainer", "optim", "logger", "eval"):
        assert config.available(group), group


# --- the wheel ------------------------------------------------------------------------------------------------

def test_wheel_carries_every_config_group_and_sweep_preset(wheel_names):
    conf = repo_files("conf", "*.yaml")
    assert "config.yaml" in conf and "hydra/launcher/slurm_gpu.yaml" in conf  # the nested group too
    missing = [f for f in conf if f"{PKG}/conf/{f}" not in wheel_names]
    assert not missing, missing
    sweeps = repo_files("sweeps", "*.yaml") + ["README.md"]
    assert "main.yaml" in sweeps
    missing = [f for f in sweeps if f"{PKG}/sweeps/{f}" not in wheel_names]
    assert not missing, missing
    # the wheel installs them inside the package only: nothing named conf/ or sweeps/ in site-packages
    assert not [n for n in wheel_names if n.split("/", 1)[0] in ("conf", "sweeps", "tests")]


def test_wheel_carries_every_module_and_no_top_level_analysis(wheel_names):
    modules = [f"{PKG}/{f}" for f in repo_files(PKG, "*.py") if "_cache/" not in f]
    assert modules and not [m for m in modules if m not in wheel_names]
    assert f"{PKG}/analysis/tables/reference_results.csv" in wheel_names  # fixedcode analyze reference=true
    assert {f"{PKG}/__init__.py", f"{PKG}/__main__.py", f"{PKG}/run.py", f"{PKG}/cli/__main__.py",
            f"{PKG}/cli/analyze.py"} <= wheel_names
    # the checkout's analysis/ is only the `python -m analysis` alias: no generic top-level name installed
    assert not [n for n in wheel_names if n.split("/", 1)[0] == "analysis"]


def test_wheel_metadata_has_the_scripts_and_dev_extra(wheel, wheel_names):
    with zipfile.ZipFile(wheel) as zf:
        dist = next(n.split("/")[0] for n in wheel_names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(f"{dist}/METADATA").decode()
        scripts = zf.read(f"{dist}/entry_points.txt").decode()
    assert "fixedcode = fixedcode_study.cli.__main__:main" in scripts
    assert "fixedcode-" not in scripts  # one front door (the fixedcode-<verb> aliases went: docs/commands.md)
    assert any(line.startswith("Requires-Dist: pytest") and 'extra == "dev"' in line
               for line in metadata.splitlines())
    # the analysis adjusts p-values with statsmodels at run time: a dependency of every install
    assert any(line.startswith("Requires-Dist: statsmodels") and "extra ==" not in line
               for line in metadata.splitlines())


def test_unpacked_wheel_finds_its_own_configs(wheel, tmp_path):
    """Importing the wheel's files (not this checkout) resolves conf/ and sweeps/ inside the package."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)  # a pure wheel's files are the installed layout
    code = ("import json, fixedcode_study.config as c; from fixedcode_study.studies import study as sweep; "
            "cfg = c.compose(['model=test_micro', 'input=gf2']); "
            "print(json.dumps({'file': c.__file__, 'conf': c.CONFIG_DIR, 'sweeps': str(c.SWEEPS_DIR), "
            "'studies': sweep.available_studies(), 'model': cfg.model.name, 'input': cfg.input.name, "
            "'launcher': (c.Path(c.CONFIG_DIR) / 'hydra/launcher/slurm_gpu.yaml').is_file()}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(site)), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(info["file"]).resolve() == (site / PKG / "config.py").resolve()
    assert Path(info["conf"]).resolve() == (site / PKG / "conf").resolve()
    assert Path(info["sweeps"]).resolve() == (site / PKG / "sweeps").resolve()
    assert info["model"] == "test_micro" and info["input"] == "gf2" and info["launcher"] is True
    assert sorted(info["studies"]) == sorted(p[: -len(".yaml")] for p in repo_files("sweeps", "*.yaml"))


# --- the test session's own environment -----------------------------------------------------------------------

def test_session_environment_is_hermetic(hermetic_env, hermetic_dirs, tmp_path_factory):
    root = Path(hermetic_env["FIXEDCODE_TEST_ENV_ROOT"])
    assert root.resolve().is_relative_to(tmp_path_factory.getbasetemp().resolve())
    assert not root.resolve().is_relative_to(REPO)
    assert {"FIXEDCODE_CACHE", "FIXEDCODE_OUT", "WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR",
            "WANDB_ARTIFACT_DIR", "HF_HOME", "HF_DATASETS_CACHE", "MPLCONFIGDIR", "XDG_CACHE_HOME",
            "TORCHINDUCTOR_CACHE_DIR"} <= set(hermetic_dirs)
    run_root = root.parent.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # the token cache is the run's
    for key in hermetic_dirs:
        path = Path(os.environ[key])
        assert path.is_dir() and path.resolve().is_relative_to((run_root if key == "FIXEDCODE_CACHE" else root).resolve()), \
            (key, path)
    assert os.environ["WANDB_MODE"] == "offline" and os.environ["HF_HUB_OFFLINE"] == "1"
    assert "WANDB_API_KEY" not in os.environ and "WANDB_RUN_ID" not in os.environ

    from fixedcode_study.training.loggers import resolve_wandb_mode

    assert resolve_wandb_mode("auto") == "offline" and resolve_wandb_mode("online") == "offline"


def test_subprocesses_and_libraries_see_the_hermetic_folders(hermetic_env):
    """A child process inherits the settings, and the libraries resolve their folders from them."""
    code = """
import json, os
import datasets.config, huggingface_hub.constants, matplotlib, torch.hub, wandb.env
print(json.dumps({
    "env": dict(os.environ),
    "wandb_cache": str(wandb.env.get_cache_dir()),
    "wandb_data": wandb.env.get_data_dir(), "wandb_artifacts": wandb.env.get_artifact_dir(),
    "wandb_dir": wandb.env.get_dir(), "hf_home": huggingface_hub.constants.HF_HOME,
    "hf_hub": huggingface_hub.constants.HF_HUB_CACHE, "hf_datasets": str(datasets.config.HF_DATASETS_CACHE),
    "mpl_config": matplotlib.get_configdir(), "mpl_cache": matplotlib.get_cachedir(), "torch_hub": torch.hub.get_dir(),
}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    child = info.pop("env")
    assert {k: child.get(k) for k in hermetic_env} == hermetic_env
    root = Path(hermetic_env["FIXEDCODE_TEST_ENV_ROOT"]).resolve()
    outside = {k: v for k, v in info.items() if not Path(v).resolve().is_relative_to(root)}
    assert not outside, outside
