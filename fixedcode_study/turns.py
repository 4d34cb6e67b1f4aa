"""Waiting one's turn on this machine: an exclusive flock on a file that processes share.

Two things take turns this way: building a data cache (data/prepare.py), and compiling a model's
graphs (training/compile_turns.py). The kernel drops an flock when its holder exits, also when it
is killed, so a crash never leaves a stale turn behind. A filesystem without flock (some Lustre and
NFS mounts) cannot serialise anything: there each process goes on alone, as if no other were there,
which costs time, never a result.
"""

from __future__ import annotations

import time
from typing import IO, Any, Callable

__all__ = ["give_turn", "take_turn"]


def take_turn(fh: IO[Any], waiting: Callable[[], None]) -> float | None:
    """Take the exclusive flock on the open file `fh`, waiting while another process holds it;
    `waiting()` is called once, before that wait, to say so. Returns the seconds waited (0.0 when
    the turn was free), or None where the filesystem has no flock (nothing is held then)."""
    import fcntl  # POSIX only: imported here so that importing this module works anywhere

    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return 0.0
    except BlockingIOError:
        pass  # held by another process: wait below
    except OSError:
        return None
    waiting()
    t0 = time.perf_counter()
    fcntl.flock(fh, fcntl.LOCK_EX)
    return time.perf_counter() - t0


def give_turn(fh: IO[Any]) -> None:
    """Give back a turn `take_turn` took on `fh` (the file stays open: the caller closes it)."""
    import fcntl

    fcntl.flock(fh, fcntl.LOCK_UN)
