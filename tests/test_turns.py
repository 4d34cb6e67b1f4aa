"""The machine-wide turn (fixedcode_study/turns.py): taken at once when free, waited for (and said
so) while another open file holds it, and skipped, holding nothing, where flock is unsupported."""

from __future__ import annotations

import errno
import fcntl
import threading
from pathlib import Path

import pytest

from fixedcode_study.turns import give_turn, take_turn
from helpers.locks import held_elsewhere


def test_a_free_turn_is_taken_at_once_and_held_until_given(tmp_path: Path) -> None:
    path, said = tmp_path / "turn", []
    with open(path, "a+") as fh:
        assert take_turn(fh, lambda: said.append("waiting")) == 0.0
        assert held_elsewhere(path) and said == []
        give_turn(fh)
        assert not held_elsewhere(path)


def test_a_held_turn_is_waited_for_and_the_wait_is_said_and_timed(tmp_path: Path) -> None:
    path, said = tmp_path / "turn", []
    other = open(path, "a+")
    fcntl.flock(other, fcntl.LOCK_EX)
    release = threading.Timer(0.3, lambda: (fcntl.flock(other, fcntl.LOCK_UN), other.close()))
    release.start()
    with open(path, "a+") as fh:
        waited = take_turn(fh, lambda: said.append(held_elsewhere(path)))
        release.join()
        assert said == [True]  # said once, before the wait, while the other still held it
        assert waited is not None and waited >= 0.2
        assert held_elsewhere(path)
        give_turn(fh)


def test_without_flock_the_turn_is_skipped_and_nothing_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem without flock (NFS without a lock daemon answers ENOLCK): go on alone."""
    def no_locks(fh, operation):  # the kernel's answer on such a mount, not a stand-in for our code
        raise OSError(errno.ENOLCK, "No locks available")

    path, said = tmp_path / "turn", []
    with open(path, "a+") as fh:
        monkeypatch.setattr(fcntl, "flock", no_locks)
        assert take_turn(fh, lambda: said.append("waiting")) is None
        monkeypatch.undo()
        assert said == [] and not held_elsewhere(path)
