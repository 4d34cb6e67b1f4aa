"""Hydra configuration: where conf/ and sweeps/ live, and the one place configs are composed.

Every entry point gets its config from here: the Hydra app (`run`) through `CONFIG_DIR`, every
other command (describe, sweep, evaluate, pretokenize, bench, bench_input) through `compose`, and
code that needs one option of a group as plain data through `load_option` (an input variant named
by another, e.g. `init_code: binary16`: `resolve_input_references`). Nothing else reads conf/.

It is also the one module below the front door that touches omegaconf: a composed config leaves it
as plain data (`job_config`), and config.yaml's text is written from plain data (`to_yaml`), so
the layers below (spec/ resolves that plain data into a JobSpec) never hold a DictConfig.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from .errors import ConfigError
from .hardware import cpu_precision

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent  # the checkout, in a source tree or an editable install


def _data_dir(name: str, marker: str) -> Path:
    """conf/ or sweeps/: inside the package in an installed wheel (setup.py ships them there),
    else beside it at the top of the checkout (source tree, editable install)."""
    candidates = (PACKAGE_DIR / name, PROJECT_ROOT / name)
    return next((c for c in candidates if (c / marker).is_file()), candidates[-1])


CONFIG_DIR = str(_data_dir("conf", "config.yaml"))
SWEEPS_DIR = _data_dir("sweeps", "main.yaml")


def compose(overrides: Sequence[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """conf/config.yaml with these overrides, exactly as `python -m fixedcode_study.run` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides),
                             return_hydra_config=return_hydra_config)


def job_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A composed config as plain, resolved data, without Hydra's own `hydra` node (a compose with
    return_hydra_config=True, the sweep's, carries it; a job never reads it)."""
    if isinstance(cfg, DictConfig):
        keys = [k for k in cfg if k != "hydra"]
        return OmegaConf.to_container(OmegaConf.masked_copy(cfg, keys), resolve=True)  # type: ignore[return-value]
    return {k: copy.deepcopy(v) for k, v in cfg.items() if k != "hydra"}


def plain(node: Any) -> Any:
    """One node of a composed config (a group, a list, a value) as plain resolved data."""
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return copy.deepcopy(node)


def number_job(sweep_config: DictConfig, idx: int) -> DictConfig:
    """A sweep job's composed config with its Hydra job id and number set (as Hydra's launchers do)."""
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    return sweep_config


def to_yaml(data: Mapping[str, Any]) -> str:
    """YAML text of plain config data, formatted as OmegaConf writes a config (config.yaml)."""
    return OmegaConf.to_yaml(OmegaConf.create(dict(data)))


def compose_variant(overrides: Sequence[str], input_name: str) -> DictConfig:
    """The config of `overrides` with the input variant replaced by `input_name` (benchmarks)."""
    return compose([o for o in overrides if not o.startswith("input=")] + [f"input={input_name}"])


def available(group: str) -> list[str]:
    """Option names of a config group (conf/<group>/*.yaml)."""
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def config_key_near(key: str) -> str | None:
    """The key of conf/ that `key` (an override Hydra could not place, `train.heldout_fractoin`)
    nearly spells, or None: a dotted key is looked up among its parent's keys in config.yaml, or
    among the keys of any option of a group (conf/<group>/*.yaml); a top-level one among
    config.yaml's keys and the group names. Read as plain YAML: a hint, never a compose."""
    import difflib

    import yaml

    root = Path(CONFIG_DIR)
    top = yaml.safe_load((root / "config.yaml").read_text()) or {}
    parent, _, leaf = key.lstrip("+~").rpartition(".")
    if not parent:
        known = [k for k in top if k not in ("defaults", "hydra")] + [d.name for d in root.iterdir() if d.is_dir()]
    else:
        node: Any = top
        for part in parent.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        known = list(node) if isinstance(node, dict) else []
        group = root / parent
        if not known and "." not in parent and group.is_dir():
            for option in group.glob("*.yaml"):
                known += [k for k in (yaml.safe_load(option.read_text()) or {}) if k != "defaults"]
    close = difflib.get_close_matches(leaf, sorted(set(known)), n=1, cutoff=0.75)
    return f"{parent}.{close[0]}" if close and parent else (close[0] if close else None)


def load_option(group: str, name: str, field: str) -> dict[str, Any]:
    """conf/<group>/<name>.yaml as a plain resolved dict; `field` is the setting that named it."""
    path = Path(CONFIG_DIR) / group / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(field, f"no {group} option {name!r} in conf/{group}", f"use one of {', '.join(available(group))}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


# Input settings that name another conf/input variant: a learned table's starting code, the RMS a
# code matches, and the fixed code a code_map reads.
REFERENCE_KEYS = ("init_code", "rms_reference", "code")


def resolve_input_references(input_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The input config with `init_code` / `rms_reference: <variant name>` replaced by that variant's
    settings (conf/input/<name>.yaml as it is today: editing it changes every variant naming it)."""
    cfg = {k: v for k, v in input_cfg.items()}
    for key in REFERENCE_KEYS:
        if isinstance(cfg.get(key), str):  # optional: only inputs that name another variant have them
            cfg[key] = resolve_input_references(load_option("input", cfg[key], field=f"input.{key}"))
    return cfg


def resolve_output_references(output_cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The output config with `code: <conf/input variant>` replaced by that variant's settings
    (references inside it resolved too); {} (the untied head) for a config without an output."""
    cfg = dict(output_cfg or {})
    if isinstance(cfg.get("code"), str):
        cfg["code"] = resolve_input_references(load_option("input", cfg["code"], field="output.code"))
    return cfg


def override_key(line: str) -> str:
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
        if not any(override_key(str(line)) == p or override_key(str(line)).startswith((p + ".", p + "/"))
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
    if not OmegaConf.has_resolver("cpu_precision"):  # conf/trainer/cpu.yaml (hardware.py)
        OmegaConf.register_new_resolver("cpu_precision", cpu_precision)


register_resolvers()
