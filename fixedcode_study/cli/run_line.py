"""The `run` command line: Hydra composes each job's config (once), and the jobs' results come back.

`launch(task_function)` is Hydra's own app loop for a plain run or `-m` sweep (what `@hydra.main`
does through hydra._internal.utils._run_hydra), with two differences that make `run` behave like
every other command:
  - the jobs' return values come back to the caller (Hydra's loop drops them): the summary of a
    sweep is built from what the launcher returns (studies/launcher.py), not from shared state;
  - a bad option or override is one line and exit 2 (Hydra prints a multi-line report and exits 1).
    An override is checked by the compose that runs the job (or, for a sweep, by the launcher's
    compose of every job before the first starts); there is no separate validating compose, and a
    bad *value* stops at the job's JobSpec, before its record is opened (cli/run.py).
Every other Hydra flag (--cfg, --info, --hydra-help, -cp/-cn/-cd, shell completion) goes to
Hydra's own `@hydra.main` path (`None` is returned and the caller runs it); `-h/--help` prints the
command's docstring ahead of Hydra's listing of the config groups.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from ..errors import ConfigError
from .args import conf_hint, one_line

HYDRA_FLAGS = {"-m", "--multirun", "-h", "--help", "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p",
               "--package", "-i", "--info", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
               "--experimental-rerun", "-sc", "--shell-completion"}
PLAIN = {"-m", "--multirun"}  # the only flags a run or sweep of jobs takes


def check_flags(args: Sequence[str], doc: str) -> bool:
    """Print the help, or exit 2 with one line for an unknown option. True when Hydra should run
    the jobs itself through `launch` (a plain run or -m sweep), False for Hydra's other modes."""
    if {"-h", "--help"} & set(args):
        print(doc.rstrip() + "\n")
        return False  # Hydra's help follows: the config groups and their options
    unknown = [a for a in args if a.startswith("-") and a.split("=", 1)[0] not in HYDRA_FLAGS]
    if unknown:
        print(f"error: {ConfigError(unknown[0], 'is not an option of `fixedcode run`', 'see fixedcode run --help')}",
              file=sys.stderr)
        sys.exit(2)
    return all(a in PLAIN for a in args if a.startswith("-"))


def launch(task_function: Callable[[Any], Any], config_dir: str, config_name: str = "config") -> list[Any]:
    """Run the jobs of this command line (sys.argv) under Hydra; the task function's return value
    of each, in launch order. A bad override: one line on stderr, exit 2."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import (create_automatic_config_search_path,
                                       detect_calling_file_or_module_from_task_function, detect_task_name,
                                       get_args_parser)
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    args = get_args_parser().parse_args()
    calling_file, calling_module = detect_calling_file_or_module_from_task_function(task_function)
    search_path = create_automatic_config_search_path(calling_file, calling_module, config_dir)
    overrides = list(args.overrides)
    # As Hydra's _run_app: -m (or an explicit hydra.mode) decides, and the mode is put in the config.
    multirun = args.multirun or "hydra.mode=MULTIRUN" in overrides
    if not any(o.startswith("hydra.mode=") for o in overrides):
        overrides.append(f"hydra.mode={'MULTIRUN' if multirun else 'RUN'}")
    try:
        hydra = Hydra.create_main_hydra2(task_name=detect_task_name(calling_file, calling_module),
                                         config_search_path=search_path)
        if not multirun:
            return [hydra.run(config_name=config_name, task_function=task_function, overrides=overrides).return_value]
        returns = hydra.multirun(config_name=config_name, task_function=task_function, overrides=overrides)
        return [ret.return_value for batch in returns for ret in batch]
    except (HydraException, OmegaConfBaseException) as err:
        line = one_line(err)
        print(f"error: overrides: {line}; {conf_hint(line)}", file=sys.stderr)
        sys.exit(2)
    finally:
        GlobalHydra.instance().clear()
