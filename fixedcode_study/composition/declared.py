"""A study file's `pairs:` block: which pairs of its jobs `fixedcode compose study=<study>` composes, and how.

    pairs:
      arms: [learned, binary16, gf2]     # input names of the study's grid (each arm's job at a seed)
      seeds: [[1, 2], [3, 4], [5, 6]]    # one pair per entry: a = the first seed's job, b = the second's
      settings:                          # fields of ComposeSettings (settings.py); the rest keep their defaults
        stitch_tokens: 131072

`parse_pairs(block, where)` checks the block and returns `DeclaredPairs`; a bad entry is one line
naming its field (`composition.yaml:pairs.seeds[1]: ...; fix`). The settings are declared with the
study, before any result exists, and the pairs runner (studies/pairs.py) composes every pair under
them, so every record of a study is computed under one declared set of settings.

Import-light (errors and settings only): the study loader (studies/study.py) checks the block when it
loads a study, and the analysis reads the declared settings without the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..errors import ConfigError
from .settings import ComposeSettings

KEY = "pairs"
KEYS = ("arms", "seeds", "settings")
SETTING_NAMES = tuple(f.name for f in fields(ComposeSettings))


@dataclass(frozen=True)
class DeclaredPair:
    """One declared composition: `arm`'s job at seed `a` composed with its job at seed `b`."""

    arm: str
    a: int
    b: int

    @property
    def name(self) -> str:
        """Its folder under <study>/compose/ and its name in every line that reports on it."""
        return f"{self.arm},seeds={self.a}+{self.b}"


@dataclass(frozen=True)
class DeclaredPairs:
    arms: tuple[str, ...]
    seeds: tuple[tuple[int, int], ...]
    settings: ComposeSettings

    @property
    def pairs(self) -> tuple[DeclaredPair, ...]:
        """Every declared pair, arm by arm, in the file's order."""
        return tuple(DeclaredPair(arm, a, b) for arm in self.arms for a, b in self.seeds)


def _seed(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _kind(default: Any) -> str:
    """What a setting takes, from its default (precision's None default takes a Lightning precision)."""
    return {int: "whole number", float: "number"}.get(type(default), "text")


def _of_kind(value: Any, default: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, str) or (default is None and value is None)


def parse_pairs(block: Any, where: str) -> DeclaredPairs:
    """The `pairs:` block of the study file `where` names (e.g. "composition.yaml"), checked."""
    field = f"{where}:{KEY}"
    if not isinstance(block, Mapping):
        raise ConfigError(field, "is not a mapping", "write pairs: {arms: [...], seeds: [[a, b], ...], settings: {...}}")
    unknown = sorted(set(block) - set(KEYS))
    if unknown:
        raise ConfigError(f"{field}.{unknown[0]}", "is not a key of pairs", f"use only {', '.join(KEYS)}")
    arms = block.get("arms")
    if not isinstance(arms, list) or not arms or not all(isinstance(a, str) and a.strip() for a in arms):
        raise ConfigError(f"{field}.arms", f"{arms!r} is not a list of input names",
                          "write arms: [learned, binary16, ...] (the inputs of the study's grid)")
    if len(set(arms)) != len(arms):
        raise ConfigError(f"{field}.arms", "an arm is listed twice", "list each arm once")
    seeds = block.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise ConfigError(f"{field}.seeds", f"{seeds!r} is not a list of seed pairs", "write seeds: [[1, 2], [3, 4]]")
    used: set[int] = set()
    for i, pair in enumerate(seeds):
        here = f"{field}.seeds[{i}]"
        if not isinstance(pair, list) or len(pair) != 2 or not all(_seed(s) for s in pair):
            raise ConfigError(here, f"{pair!r} is not two seeds", "write each pair as [a_seed, b_seed] (integers >= 0)")
        if pair[0] == pair[1]:
            raise ConfigError(here, f"pairs seed {pair[0]} with itself", "pair two different seeds")
        again = used & set(pair)
        if again:
            # a seed in two pairs would make the pairs of one arm share a model: they are not independent
            raise ConfigError(here, f"seed {min(again)} is already in another pair",
                              "use each seed in one pair only (independent pairs)")
        used |= set(pair)
    settings = block.get("settings") or {}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{field}.settings", "is not a mapping", "write settings: {stitch_tokens: 131072, ...}")
    defaults = ComposeSettings()
    for key, value in settings.items():
        if key not in SETTING_NAMES:
            raise ConfigError(f"{field}.settings.{key}", "is not a compose setting",
                              f"use {', '.join(SETTING_NAMES)} (fixedcode compose --help)")
        if not _of_kind(value, getattr(defaults, key)):
            raise ConfigError(f"{field}.settings.{key}", f"{value!r} is not a {_kind(getattr(defaults, key))}",
                              f"write {key}: <a {_kind(getattr(defaults, key))}>")
    try:
        composed = ComposeSettings(**settings)
    except ConfigError as err:  # its own check, named where the value is written
        raise ConfigError(f"{field}.settings.{err.field}", err.problem, err.fix) from None
    return DeclaredPairs(tuple(arms), tuple((int(a), int(b)) for a, b in seeds), composed)
