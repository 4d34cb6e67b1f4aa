"""`fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH ...`: lm-eval's own command line.

    fixedcode eval-tasks tasks/ tasks=hellaswag data_dir=../shared/data/eval    # offline: the mirror's YAML
    fixedcode lm-eval --model fixedcode --model_args checkpoint=outputs/multirun/main/input=gf2,seed=1 \\
        --include_path tasks/ --tasks hellaswag --batch_size 32

Without `--include_path`, lm-eval reads hellaswag's YAML and data from the Hugging Face Hub (online only).

Every `lm_eval` flag works unchanged: this is lm-eval's own command (`lm_eval.__main__.cli_evaluate`,
its console script), with our checkpoints registered as the `fixedcode` model first: lm-eval 0.4
reads no plugin entry points, so the plain `lm_eval` command cannot find it. The model itself is
evaluation/lm.py (FixedCodeLM). checkpoint= follows the rule of every command (hub/source.py): a
job directory, its checkpoints/final, or one of our exports whose source checkpoint is here. lm-eval
splits model_args at commas, which the sweep's folder names hold (`input=gf2,seed=1`), so before
lm-eval reads the line the path is re-joined (evaluation/lm.py's split_checkpoint_arg), resolved
and quoted, which lm-eval's own parser keeps whole. lm-eval parses the arguments and prints its own
--help; a bad argument or checkpoint is reported our way, as one line and exit 2 (argparse's
documented `ArgumentParser.error` hook, set while lm-eval parses: nothing of lm-eval's is patched).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError
from ..evaluation import lm as _registers_fixedcode  # noqa: F401  (import registers the model)
from ..evaluation.lm import QUOTES, split_checkpoint_arg
from ..evaluation.tasks import missing_include_paths
from .args import exit_with, with_argv

MODEL_ARGS = ("--model_args", "-a")
EXPORT_FIX = "evaluate the folder itself with lm-eval's own model: --model hf --model_args pretrained=PATH"


@contextmanager
def argument_errors_on_one_line() -> Iterator[None]:
    """While lm-eval parses: argparse prints the error alone, not usage plus the error, and still exits 2."""
    def error(parser: argparse.ArgumentParser, message: str) -> None:
        print(f"error: {parser.prog}: {message}; see fixedcode lm-eval --help", file=sys.stderr)
        sys.exit(2)

    original = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = error
    try:
        yield
    finally:
        argparse.ArgumentParser.error = original


def with_checkpoint_resolved(item: str) -> str:
    """One model_args word with its checkpoint= path re-joined, resolved and, when it holds a comma,
    quoted (lm-eval's split keeps quoted commas; its value parser unquotes a Python literal)."""
    if item.lstrip().startswith("{"):  # lm-eval's JSON form: no comma splitting to undo
        return item
    path, rest = split_checkpoint_arg(item)
    if path is None:
        return item
    from ..hub.source import checkpoint_folder

    resolved = str(checkpoint_folder(path, EXPORT_FIX))
    if "," in resolved and all(q in resolved for q in QUOTES):
        raise ConfigError("checkpoint", f"{resolved} holds a comma and both quote characters",
                          "rename the folder: lm-eval's model_args cannot carry that path")
    return ",".join([f"checkpoint={repr(resolved) if ',' in resolved else resolved}", *rest])


def _raised_by_argument_checks(err: BaseException) -> bool:
    """lm-eval checks its arguments (an unknown task, --limit with --samples, ...) in lm_eval/config/
    and reports them as a bare ValueError; one raised anywhere else is a real failure, kept whole."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and Path(tb.tb_frame.f_code.co_filename).parent.name == "config" \
        and "lm_eval" in Path(tb.tb_frame.f_code.co_filename).parts


def resolve_model_args(argv: list[str]) -> list[str]:
    """argv with every --model_args word's checkpoint= taken care of (with_checkpoint_resolved)."""
    out, in_model_args = [], False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if arg in MODEL_ARGS:
            in_model_args = True
        elif flag in MODEL_ARGS and eq:
            arg, in_model_args = f"{flag}={with_checkpoint_resolved(value)}", False
        elif arg.startswith("-"):
            in_model_args = False
        elif in_model_args:
            arg = with_checkpoint_resolved(arg)
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    """lm-eval's `cli_evaluate` on this command line (default: sys.argv's), with one-line argument errors."""
    from lm_eval.__main__ import cli_evaluate

    try:
        if missing := missing_include_paths(args := list(sys.argv[1:] if argv is None else argv)):
            raise ConfigError("--include_path", f"{missing[0]} is not a folder",
                              "make the task YAMLs first: fixedcode eval-tasks OUT_DIR tasks=... (its --help)")
        args = resolve_model_args(args)
        with argument_errors_on_one_line():
            return with_argv("fixedcode lm-eval", args, cli_evaluate)  # lm-eval reads sys.argv itself
    except ConfigError as err:  # a bad checkpoint or model argument, here or in FixedCodeLM
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:
        if not _raised_by_argument_checks(err):
            raise
        print(f"error: fixedcode lm-eval: {err}; `fixedcode lm-eval ls tasks` lists the tasks", file=sys.stderr)
        return 2


if __name__ == "__main__":
    exit_with(main())
