"""`fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH ...`: lm-eval's own command line.

    fixedcode lm-eval --model fixedcode --model_args checkpoint=outputs/multirun/main/input=gf2,seed=1 \\
        --tasks hellaswag --batch_size 32

Every `lm_eval` flag works unchanged (`python -m fixedcode_study.lm_eval_model` is the same
command), with our checkpoints registered as the `fixedcode` model first: lm-eval 0.4 reads no
plugin entry points, so the plain `lm_eval` command cannot find it. The model itself is
evaluation/lm.py (FixedCodeLM). checkpoint= follows the rule of every command (hub/source.py): a
job directory, its checkpoints/final, or one of our exports whose source checkpoint is here. lm-eval
splits model_args at commas, which the sweep's folder names hold (`input=gf2,seed=1`), so before
lm-eval reads the line the path is re-joined (evaluation/lm.py's split_checkpoint_arg), resolved
and quoted, which lm-eval's own parser keeps whole. lm-eval parses the arguments and prints its own
--help; a bad argument or checkpoint is reported our way, as one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ConfigError
from ..evaluation import lm as _registers_fixedcode  # noqa: F401  (import registers the model)
from ..evaluation.lm import QUOTES, split_checkpoint_arg
from .args import exit_with

MODEL_ARGS = ("--model_args", "-a")
EXPORT_FIX = "evaluate the folder itself with lm-eval's own model: --model hf --model_args pretrained=PATH"


def _one_line_errors(parser) -> None:
    """argparse prints usage plus the error and exits 2; keep the exit, print the error alone."""
    def error(message: str) -> None:
        print(f"error: {parser.prog}: {message}; see fixedcode lm-eval --help", file=sys.stderr)
        sys.exit(2)

    parser.error = error


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


def cli() -> int:
    """lm-eval's `cli_evaluate` (lm_eval/__main__.py), reading sys.argv, with one-line argument errors."""
    from lm_eval.__main__ import setup_logging
    from lm_eval._cli.harness import HarnessCLI

    setup_logging()
    harness = HarnessCLI()
    for parser in (harness._parser, *harness._subparsers.choices.values()):
        _one_line_errors(parser)
    saved = sys.argv
    try:
        sys.argv = [saved[0], *resolve_model_args(saved[1:])]
        harness.execute(harness.parse_args())
    except ConfigError as err:  # a bad checkpoint or model argument, here or in FixedCodeLM
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:
        if not _raised_by_argument_checks(err):
            raise
        print(f"error: fixedcode lm-eval: {err}; `fixedcode lm-eval ls tasks` lists the tasks",
              file=sys.stderr)
        return 2
    except SystemExit as stop:  # lm-eval's own exits (--help, errors): their code as ours
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)  # sys.exit("message"): what Python would print, exit 1
        return 1
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    exit_with(cli())
