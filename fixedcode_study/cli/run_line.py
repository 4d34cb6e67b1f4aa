"""The `run` command line checked before Hydra sees it: an unknown option or a bad override is one
line and exit 2, as for every other command (Hydra itself prints a multi-line report and exits 1).

Overrides are checked by composing them once, a sweep's (`seed=1,2,3`, `range(...)`) at its first
value: a key that does not exist, a preset that is not in conf/ or a malformed override is refused
before any job starts. Hydra's own flags pass through; `-h/--help` prints the command's docstring
ahead of Hydra's listing of the config groups.
"""

from __future__ import annotations

import sys
from typing import Sequence

from ..config import compose
from ..errors import ConfigError
from .args import one_line

HYDRA_FLAGS = {"-m", "--multirun", "-h", "--help", "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p",
               "--package", "-i", "--info", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
               "--experimental-rerun", "-sc", "--shell-completion"}


def first_values(args: Sequence[str]) -> list[str]:
    """The override arguments of a Hydra command line, each sweep at its first value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = [a for a in args if not a.startswith("-") and ("=" in a or a.startswith("~"))]
    out = []
    for override in OverridesParser.create().parse_overrides(lines):
        if override.is_sweep_override():
            prefix = override.input_line[:len(override.input_line) - len(override.input_line.lstrip("+~"))]
            out.append(f"{prefix}{override.key_or_group}={next(iter(override.sweep_string_iterator()))}")
        else:
            out.append(override.input_line)
    return out


def check(args: Sequence[str], doc: str) -> None:
    """Print the help, or exit 2 with one line for a bad option or override; else return."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if {"-h", "--help"} & set(args):
        print(doc.rstrip() + "\n")
        return  # Hydra's help follows: the config groups and their options
    unknown = [a for a in args if a.startswith("-") and a.split("=", 1)[0] not in HYDRA_FLAGS]
    try:
        if unknown:
            raise ConfigError(unknown[0], "is not an option of `fixedcode run`", "see fixedcode run --help")
        compose(first_values(args))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except (HydraException, OmegaConfBaseException) as err:
        print(f"error: overrides: {one_line(err)}; see conf/ for the groups and keys", file=sys.stderr)
        sys.exit(2)
