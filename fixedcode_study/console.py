"""What a researcher sees while jobs run: one progress bar and one result line per job.

Inside `job_console(<job>/run.log)` (run.py wraps every job in it; `fixedcode evaluate` wraps its
evaluation too, evaluation/harness.library_output_to) everything the libraries say
goes to the job's log file instead of the terminal: Lightning's info lines and tips, Python
warnings, lm-eval's logging and progress bars, W&B's banner and run summary, and whatever child
processes write (lm-eval runs `git describe`, which says "fatal: not a git repository" outside a
checkout). It works at the file-descriptor level (fds 1 and 2 point at the log while the job
runs), so output from C code and subprocesses is caught too, and logging records reach the log
through one file handler, with timestamps, instead of each library's own console handler.

Our own lines reach the terminal through `say` (result and failure lines, run.py) and
`terminal_stdout` (code that prints with `print`, e.g. data preparation's [data] lines), and the
training progress bar (training/progress.py `JobProgressBar`: optimizer steps of the whole run,
validation results as its postfix, no bar per validation pass) writes to the terminal too. This
module imports no Lightning: a sweep's own process (studies/launcher.py) only launches workers, and
importing Lightning there cost seconds before the first job started.

`-v` / `--verbose` on `fixedcode run` (`verbose=true` on `fixedcode sweep`), or
FIXEDCODE_VERBOSE=1 in the environment (inherited by a sweep's jobs and by distributed ranks),
leaves every library's output on the terminal as before; logging records still reach run.log.
Under trainer=ddp_spawn the spawned rank 0 cannot reach the terminal, so its bar lands in run.log.

Jobs side by side (hydra/launcher=parallel, studies/launcher.py) would interleave their bars: the
launcher sets FIXEDCODE_PROGRESS_BARS=0 for its workers, and each job then shows one start line
(`attempt_header`, when it trains or evaluates) and its result line instead of a bar.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO


from .errors import ConfigError, JobBusy

__all__ = ["BARS_ENV", "VERBOSE_ENV", "attempt_header", "bars_enabled", "in_job_console",
           "is_verbose", "job_console", "quiet_lightning", "routed", "say", "take_verbose_flag", "terminal", "terminal_stdout"]

VERBOSE_ENV = "FIXEDCODE_VERBOSE"
BARS_ENV = "FIXEDCODE_PROGRESS_BARS"  # "0": no bars, a start line per job instead (parallel workers)
VERBOSE_FLAGS = ("-v", "--verbose")
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's job_logging format

log = logging.getLogger(__name__)


def attempt_header(what: str) -> None:
    """The line that opens one attempt's output in the job's log (the log keeps every attempt)."""
    routed = f"library output follows; -v or {VERBOSE_ENV}=1 shows it on the terminal"
    log.info("%s (pid %d); %s", what, os.getpid(), routed if _active is not None else "output left on the terminal")
    if not bars_enabled():  # jobs side by side: a start line on the terminal instead of a bar
        say(f"[run] {what} (pid {os.getpid()})", log=False)


def bars_enabled() -> bool:
    """Progress bars on the terminal (off in the workers of hydra/launcher=parallel: BARS_ENV=0)."""
    return os.environ.get(BARS_ENV, "").strip().lower() not in ("0", "false", "no", "off")


def is_verbose() -> bool:
    """Library output stays on the terminal (FIXEDCODE_VERBOSE=1, or -v on the command line)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def take_verbose_flag(argv: list[str]) -> list[str]:
    """Remove -v / --verbose from a command line; when present, set FIXEDCODE_VERBOSE=1 (so child
    processes, the jobs of a sweep and re-executed ranks, inherit it). Returns the rest."""
    rest = [a for a in argv if a not in VERBOSE_FLAGS]
    if len(rest) != len(argv):
        os.environ[VERBOSE_ENV] = "1"
    return rest


@dataclass
class _Routing:
    """A job's library output goes to `log_path`; `out`/`err` still reach the terminal."""
    log_path: Path
    out: TextIO | None = None  # None: nothing redirected (verbose)
    err: TextIO | None = None
    detached: list[tuple[logging.Logger, logging.Handler]] = field(default_factory=list)
    propagated: list[logging.Logger] = field(default_factory=list)
    added: logging.Handler | None = None


_active: _Routing | None = None  # set while library output goes to a job's log
_depth = 0  # job_console blocks open in this process (verbose ones too)


def in_job_console() -> bool:
    """Inside `job_console` (also a verbose one, which leaves library output on the terminal)."""
    return _depth > 0


def routed() -> bool:
    """Library output goes to a job's log now (inside `job_console`, not verbose)."""
    return _active is not None


def terminal(err: bool = False) -> TextIO:
    """The terminal the command was started from, also while a job's library output goes to its log."""
    if _active is not None:
        return _active.err if err else _active.out
    return sys.stderr if err else sys.stdout


def say(message: str, err: bool = False, log: bool = True) -> None:
    """One of our lines, for the researcher: on the terminal, and (inside a job, with `log`) in its log too."""
    print(message, file=terminal(err), flush=True)
    if _active is not None and log:
        print(message, file=sys.stderr if err else sys.stdout, flush=True)


@contextmanager
def terminal_stdout() -> Iterator[None]:
    """Inside a job, let stdout reach the terminal for a while (for our own `print`s, e.g. the
    [data] lines of a corpus being prepared); stderr stays in the log. Elsewhere a no-op."""
    if _active is None:
        yield
        return
    _flush()
    os.dup2(_active.out.fileno(), 1)
    try:
        yield
    finally:
        _flush()
        os.dup2(2, 1)  # fd 2 still points at the log


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass


def _std_fds_usable() -> bool:
    try:
        return sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2
    except (AttributeError, ValueError, OSError):  # replaced by an object without a descriptor
        return False


def _to_console(handler: logging.Handler) -> bool:
    if isinstance(handler, logging.FileHandler) or not isinstance(handler, logging.StreamHandler):
        return False
    return handler.stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)


def _route_logging(route: _Routing, quiet: bool) -> None:
    """Every logging record reaches the job's log file once, through the root logger: console
    handlers that libraries add to their own loggers (lightning, transformers) are detached for the
    job and their loggers propagate again; quiet, the root's console handler (Hydra's) goes too."""
    root = logging.getLogger()
    target = os.path.abspath(route.log_path)
    if not any(isinstance(h, logging.FileHandler) and os.path.abspath(h.baseFilename) == target
               for h in root.handlers):  # Hydra's job_logging already writes <job>/run.log
        route.added = logging.FileHandler(route.log_path, encoding="utf-8", delay=True)
        route.added.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(route.added)
    loggers = [lg for lg in list(logging.root.manager.loggerDict.values()) if isinstance(lg, logging.Logger)]
    for logger in [root, *loggers] if quiet else loggers:
        mine = [h for h in logger.handlers if _to_console(h)]
        for handler in mine:
            logger.removeHandler(handler)
            route.detached.append((logger, handler))
        if mine and not logger.propagate:
            logger.propagate = True
            route.propagated.append(logger)
    logging.captureWarnings(True)  # warnings -> the py.warnings logger -> root


def _restore_logging(route: _Routing) -> None:
    logging.captureWarnings(False)
    for logger in route.propagated:
        logger.propagate = False
    for logger, handler in route.detached:
        logger.addHandler(handler)
    if route.added is not None:
        logging.getLogger().removeHandler(route.added)
        route.added.close()


@contextmanager
def job_console(log_path: str | os.PathLike, verbose: bool | None = None) -> Iterator[None]:
    """Run one job with library output going to `log_path` (appended: one log per job, every
    attempt); a job that stops with an exception leaves its traceback there too. Verbose, or in a
    process whose stdout/stderr are not file descriptors 1 and 2 (an embedding test harness),
    everything stays on the terminal and only logging records are copied to the log."""
    global _active, _depth
    if _depth:  # nested (an evaluation inside a job): the outer job's routing holds
        yield
        return
    quiet = not (is_verbose() if verbose is None else verbose) and _std_fds_usable()
    route = _Routing(Path(log_path))
    route.log_path.parent.mkdir(parents=True, exist_ok=True)
    line_buffered = getattr(sys.stdout, "line_buffering", True)
    if quiet:
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        _flush()
        route.out = os.fdopen(os.dup(1), "w", buffering=1, encoding=encoding, errors="replace")
        route.err = os.fdopen(os.dup(2), "w", buffering=1, encoding=encoding, errors="replace")
        fd = os.open(route.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        if not line_buffered:  # keep print()s in order with logging records in the log
            sys.stdout.reconfigure(line_buffering=True)
        _active = route
    show_warning = warnings.showwarning
    _route_logging(route, quiet)
    _depth += 1
    try:
        yield  # nothing is written here before the job writes: a skipped job's log stays untouched
    except JobBusy:
        raise  # the log belongs to the process that holds the job
    except BaseException as stop:
        # A traceback for the unexpected; a bad setting or a preemption says it all in one line.
        expected = isinstance(stop, ConfigError) or not isinstance(stop, Exception)
        log.error("the job stopped: %s: %s", type(stop).__name__, stop, exc_info=not expected)
        raise
    finally:
        _depth -= 1
        _restore_logging(route)
        warnings.showwarning = show_warning  # as it was, also when warnings were captured before
        if quiet:
            _flush()
            os.dup2(route.out.fileno(), 1)
            os.dup2(route.err.fileno(), 2)
            route.out.close()
            route.err.close()
            if not line_buffered:
                sys.stdout.reconfigure(line_buffering=False)
            _active = None


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """No per-Trainer banner ("GPU available ...") or data-loader hints between a command's own lines
    (the benches' fits, compose's validations), for code that builds Trainers outside a job's console."""
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():  # (resets "print once": without these, every fit repeats them)
            warnings.simplefilter("ignore", PossibleUserWarning)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")  # Lightning vs newer torch
            yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)
