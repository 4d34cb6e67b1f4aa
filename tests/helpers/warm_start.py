"""Run `python -m <module> ...` command lines in forked copies of one interpreter that imported the
heavy libraries once (tests/cli/test_cli_docs_run.py: about 80 documented lines, each of which would
otherwise spend seconds importing torch, Lightning, Hydra, lm-eval and pandas before doing anything).

Started as `python warm_start.py` with the environment and working directory the commands need; reads
one JSON job per stdin line, {"argv": [module, args...], "log": path, "timeout": seconds}, forks, and
answers with the child's exit code (negative: the signal that ended it, as subprocess reports it).
The child is the command's own process from `runpy` on: its __main__, sys.argv and sys.path[0] are
what `python -m` gives it, its output goes to the log, and it exits through the interpreter's normal
shutdown, so exit codes and atexit handlers behave as in a cold start.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys

# What the commands import; imported here once, before any fork (none of them starts a thread on import).
import hydra  # noqa: F401
import lightning.pytorch  # noqa: F401
import lm_eval.evaluator  # noqa: F401
import matplotlib.pyplot  # noqa: F401
import pandas  # noqa: F401
import torch  # noqa: F401
import transformers  # noqa: F401

import fixedcode_study.cli.run  # noqa: F401  (not .run itself: runpy runs it as __main__)


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.setpgrp()  # the timeout below ends the command and every process it started
            signal.signal(signal.SIGALRM, lambda *_: os.killpg(0, signal.SIGKILL))
            signal.alarm(job["timeout"])
            module, *args = job["argv"]
            sys.argv = [module, *args]
            sys.path[0] = os.getcwd()  # as `python -m` puts it
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
