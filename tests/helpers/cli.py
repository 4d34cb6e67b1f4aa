"""Run `python -m fixedcode_study.run <argv>` (or any `fixedcode <verb> <argv>`) inside the test process,
as the real command line runs.

A subprocess pays several seconds per call for importing torch, Lightning, Hydra and W&B; most CLI
tests check what the command does (job directories, records, exit codes, its own lines), not the
process itself. `run_cli(argv)` calls `fixedcode_study.cli.run.main(argv)` and `fixedcode(argv)` the
front door's dispatcher (`fixedcode_study.cli.__main__.main`); each returns what a subprocess would:
the exit code and the text written to stdout and stderr.

The output is captured at the file-descriptor level: fds 1 and 2 point at temporary files and
sys.stdout / sys.stderr are streams on fds 1 and 2 while the command runs, so console.job_console
routes library output into the job's run.log exactly as in the real process (it only does so when
sys.stdout and sys.stderr are fds 1 and 2), and the result lines and progress bar reach the captured
"terminal". Everything one call leaves in the process is put back afterwards: sys.argv, the
environment (FIXEDCODE_VERBOSE from -v, PL_GLOBAL_SEED, ...), the preemption signal handlers,
torch's thread count, the root logger's handlers and level (Hydra's job logging configures them),
Hydra's GlobalHydra and a W&B service started here.

Keep real subprocesses (helpers.distributed) for what only a process shows: signals, kill -9,
preemption, Lightning's ddp re-execution, the installed wheel, and the exact terminal of a user.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

SIGNALS = [getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT") if hasattr(signal, name)]


@dataclass
class Completed:
    """The parts of subprocess.CompletedProcess the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _exit_code(stop: SystemExit) -> int:
    code = stop.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def _retarget_handlers(old: tuple, new: tuple) -> list[tuple[logging.StreamHandler, object]]:
    """Logging handlers bound to this process's stdout/stderr (Lightning adds one at import) write to
    the command's streams while it runs, as they write to the terminal in a process of its own."""
    moved = []
    loggers = [logging.getLogger(), *(lg for lg in logging.root.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler) is logging.StreamHandler and handler.stream in old:
                moved.append((handler, handler.setStream(new[old.index(handler.stream)])))
    return moved


@contextmanager
def _terminal(out: BinaryIO, err: BinaryIO) -> Iterator[None]:
    """fds 1 and 2 (and sys.stdout / sys.stderr, line-buffered streams on them) write to `out` / `err`."""
    saved_fds = os.dup(1), os.dup(2)
    saved_streams = sys.stdout, sys.stderr
    for stream in saved_streams:
        stream.flush()
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    # closefd=False: closing these streams afterwards leaves fds 1 and 2 open
    ours = (open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False),  # noqa: SIM115
            open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False))  # noqa: SIM115
    sys.stdout, sys.stderr = ours
    retargeted = _retarget_handlers(saved_streams, ours)
    try:
        yield
    finally:
        for stream in ours:
            try:
                stream.flush()
            except (ValueError, OSError):
                pass
        for handler, stream in retargeted:
            handler.setStream(stream)
        sys.stdout, sys.stderr = saved_streams
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        for stream in ours:
            stream.close()


@contextmanager
def _process_state_restored() -> Iterator[None]:
    """Whatever one command leaves in this process is put back (see the module docstring)."""
    import torch
    from hydra.core.global_hydra import GlobalHydra

    env = dict(os.environ)
    handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
    threads = torch.get_num_threads()
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    argv, cwd = list(sys.argv), os.getcwd()
    had_service = bool(os.environ.get("WANDB_SERVICE"))
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.argv = argv
        for handler in [h for h in root.handlers if h not in root_handlers]:
            root.removeHandler(handler)  # Hydra's job logging: a console handler on a stream now closed
            handler.close()
        for handler in root_handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(root_level)
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if os.environ.get("WANDB_SERVICE") and not had_service:  # as conftest's no_shared_wandb_service
            import wandb

            wandb.teardown()
        os.environ.clear()
        os.environ.update(env)
        GlobalHydra.instance().clear()


def _read(handle: BinaryIO) -> str:
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")


def _in_process(entry, argv: list[str], cwd: Path | str | None, shown: list[str]) -> Completed:
    code = 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with _process_state_restored(), _terminal(out, err):
            if cwd is not None:
                os.chdir(cwd)
            try:
                code = entry(list(argv)) or 0
            except SystemExit as stop:
                code = _exit_code(stop)
            except Exception:  # noqa: BLE001 - what Python prints before it exits 1 (Hydra reports most itself)
                import traceback

                traceback.print_exc()
                code = 1
        return Completed(shown, code, _read(out), _read(err))


def run_cli(argv: list[str], cwd: Path | str | None = None) -> Completed:
    """`python -m fixedcode_study.run *argv` (run from `cwd`), in this process."""
    from fixedcode_study.cli import run as run_module

    return _in_process(run_module.main, argv, cwd, ["fixedcode_study.run", *argv])


def fixedcode(argv: list[str], cwd: Path | str | None = None) -> Completed:
    """`fixedcode *argv` (run from `cwd`), in this process."""
    from fixedcode_study.cli.__main__ import main

    return _in_process(main, argv, cwd, ["fixedcode", *argv])


__all__ = ["Completed", "fixedcode", "run_cli"]
