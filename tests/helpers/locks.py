"""Reading an flock from outside its holder, for the tests of the machine-wide turn (turns.py)."""

from __future__ import annotations

import fcntl
from pathlib import Path


def held_elsewhere(path: Path) -> bool:
    """Whether another open file holds the lock (a second open() conflicts with flock even in-process)."""
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
