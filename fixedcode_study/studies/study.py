"""A study: the file sweeps/<study>.yaml, and its expansion into the Hydra jobs it launches.

A study file holds
  name         the study; every job runs with name=<study>, so results land in
               ${out_root}/multirun/<study>/<job_key>/ (one directory analysis reads)
  description  what it measures
  jobs         {cpu: N, paper: M}: how many jobs each scale launches (checked by the tests)
  grids        list of {override key: [values]}; each grid is one Hydra multirun (a Cartesian
               product), and the study is the union of its grids
  scales       {paper: {key: value or [values]}}: overrides for a named scale; cpu = the defaults.
               A scale may also give its own `grids` (same form as the top-level key), which then
               replace the study's grids at that scale (a CPU study with a second, CPU-only context)
  cost         notes on the cost; `fixedcode sweep <study> dry_run=true` recomputes it (studies/cost.py)
  pairs        optional: the pairs of its jobs `fixedcode compose study=<study>` composes (arms, seed
               pairs, compose settings), checked here (composition/declared.py; studies/pairs.py runs them)
  adapt        optional: the settings `fixedcode adapt study=<study>` adapts each job with (its
               held-out tokens: adaptation/settings.py; studies/adapted.py runs them)

Why a launcher over Hydra-native `hydra.sweeper.params` configs: Hydra's basic sweeper only takes
one Cartesian product per launch, and most studies are unions of products (a learned reference
plus a grid over one input's settings: code widths do not apply to the learned table). So each
grid stays a plain `python -m fixedcode_study.run -m name=<study> key=v1,v2 ...` command
(studies/grids.py runs them), and the jobs are counted with Hydra's own BasicSweeper expansion,
the code path `run -m` takes.

Extra overrides replace a grid key of the same name (`seed=1`, `model=test_micro`) or are added to
every job (`train.tokens=65536 logger=csv`).

This module turns a study into override lists and, given each job's directory and resolved spec
(the front door composes and resolves them: cli/sweep.py), into `Job`s. It composes nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from ..composition.declared import KEY as PAIRS_KEY, DeclaredPairs, parse_pairs
from ..config import SWEEPS_DIR, override_key
from ..errors import ConfigError
from ..spec import JobSpec

__all__ = ["SCALES", "Job", "Study", "available_studies", "distinct_jobs", "expand", "format_value", "in_job",
           "grid_overrides", "job_overrides", "launch_overrides", "load_study", "scale_overrides",
           "study_listing"]

SCALES = ("cpu", "paper")


@dataclass
class Study:
    name: str
    description: str
    jobs: dict[str, int]
    grids: list[dict[str, list[Any]]]
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost: str = ""
    path: Path | None = None
    pairs: DeclaredPairs | None = None   # the compositions the study declares (composition/declared.py)
    adapt: dict[str, Any] | None = None  # the adaptation settings it declares (adaptation/settings.py's keys)


def available_studies() -> list[str]:
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def study_listing() -> list[str]:
    """One line per study of sweeps/: its name, job count per scale and the first line of its aim."""
    lines = []
    for name in available_studies():
        study = load_study(name)
        counts = " / ".join(f"{n} {scale}" for scale, n in study.jobs.items())
        lines.append(f"{name:<16} {counts} jobs  {study.description.splitlines()[0]}")
    return lines


def load_study(name: str) -> Study:
    """sweeps/<name>.yaml (or a path ending in .yaml), checked for the required keys."""
    path = Path(name) if name.endswith(".yaml") else SWEEPS_DIR / f"{name}.yaml"
    if not path.exists():
        raise ConfigError("study", f"no sweep file {path}", f"use one of {', '.join(available_studies())}")
    raw = yaml.safe_load(path.read_text())
    missing = [k for k in ("name", "description", "jobs", "grids") if k not in raw]
    if missing:
        raise ConfigError(f"{path.name}:{missing[0]}", "required key is missing",
                          "see fixedcode_study/studies/study.py")
    if raw["name"] != path.stem:
        raise ConfigError(f"{path.name}:name", f"name {raw['name']!r} differs from the file name",
                          f"set name: {path.stem}")
    grids = [{k: v if isinstance(v, list) else [v] for k, v in grid.items()} for grid in raw["grids"]]
    pairs = parse_pairs(raw[PAIRS_KEY], path.name) if PAIRS_KEY in raw else None
    adapt = parse_adapt(raw[ADAPT_KEY], path.name) if ADAPT_KEY in raw else None
    return Study(raw["name"], raw["description"].strip(), dict(raw["jobs"]), grids,
                 dict(raw.get("scales") or {}), str(raw.get("cost", "")).strip(), path, pairs, adapt)


ADAPT_KEY = "adapt"


def parse_adapt(block: Any, file_name: str) -> dict[str, Any]:
    """A study's `adapt:` settings, checked as `fixedcode adapt` checks its own (one line naming the key)."""
    from dataclasses import fields

    from ..adaptation.settings import AdaptSettings

    where = f"{file_name}:{ADAPT_KEY}"
    if not isinstance(block, Mapping):
        raise ConfigError(where, "expected a mapping of adaptation settings", "see fixedcode adapt --help")
    names = [f.name for f in fields(AdaptSettings)]
    unknown = sorted(set(block) - set(names))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", "is not an adaptation setting", f"use one of {', '.join(names)}")
    try:
        AdaptSettings(**block)
    except ConfigError as err:
        raise ConfigError(f"{where}.{err.field}", err.problem, err.fix) from None
    return dict(block)


# -- turning a study into Hydra overrides ---------------------------------------------------------
def format_value(value: Any) -> str:
    """One sweep value as Hydra override text; strings that would parse as numbers/bools get quotes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        try:
            float(value)
            return f"'{value}'"
        except ValueError:
            return f"'{value}'" if value.lower() in ("true", "false", "null") else value
    return str(value)


def grid_overrides(grid: dict[str, list[Any]], replacements: list[str]) -> list[str]:
    """Overrides for one grid: `key=v1,v2` per key, then replacements (same key wins, new keys appended)."""
    out = {override_key(r): r for r in replacements if override_key(r) == "name"}  # name first, for reading
    out.update({key: f"{key}={','.join(format_value(v) for v in values)}" for key, values in grid.items()})
    for override in replacements:
        out[override_key(override)] = override
    return list(out.values())


def scale_overrides(study: Study, scale: str) -> list[str]:
    if scale not in SCALES:
        raise ConfigError("scale", f"unknown scale {scale!r}", f"use one of {', '.join(SCALES)}")
    values = study.scales.get(scale) or {}
    return [f"{k}={','.join(format_value(v) for v in (vs if isinstance(vs, list) else [vs]))}"
            for k, vs in values.items() if k != "grids"]


def scale_grids(study: Study, scale: str) -> list[dict[str, list[Any]]]:
    """The grids a scale runs: its own `grids` when it gives them, else the study's."""
    own = (study.scales.get(scale) or {}).get("grids")
    if own is None:
        return study.grids
    return [{k: v if isinstance(v, list) else [v] for k, v in grid.items()} for grid in own]


def launch_overrides(study: Study, scale: str = "cpu", extra: Sequence[str] | None = None) -> list[list[str]]:
    """Per grid, the override list given to `run -m` (name=<study> first)."""
    replacements = [f"name={study.name}", *scale_overrides(study, scale), *(extra or [])]
    return [grid_overrides(grid, replacements) for grid in scale_grids(study, scale)]


def expand(overrides: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper launches for these overrides (same code path as `run -m`)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return BasicSweeper.split_arguments(parsed, max_batch_size=None)[0]


def job_overrides(study: Study, scale: str = "cpu", extra: Sequence[str] | None = None) -> list[list[str]]:
    """Every job of the study as its own override list, grid after grid, in launch order."""
    return [job for grid in launch_overrides(study, scale, extra) for job in expand(grid)]


# -- jobs ---------------------------------------------------------------------------------------------
@dataclass
class Job:
    overrides: list[str]
    job_dir: Path            # where Hydra puts it: ${hydra.sweep.dir}/${hydra.sweep.subdir}
    spec: JobSpec            # its resolved spec (the front door resolves it: cli/sweep.py)
    launcher: Mapping[str, Any] = field(default_factory=dict)  # hydra.launcher: how the sweep launches it


def in_job(err: ConfigError, job_dir: Path) -> ConfigError:
    """A job's one-line error with the job named (field: problem (in job <key>); fix)."""
    return ConfigError(err.field, f"{err.problem} (in job {job_dir.name})", err.fix)


def distinct_jobs(study: Study, jobs: list[Job]) -> list[Job]:
    """`jobs`, checked that no two grids launch the same job directory (it would train once, count twice)."""
    seen: set[Path] = set()
    for job in jobs:
        if job.job_dir in seen:
            raise ConfigError(f"{study.name}.grids", f"two grids launch the same job {job.job_dir.name}",
                              "remove the overlap from one grid")
        seen.add(job.job_dir)
    return jobs
