"""The one way a file or folder the record depends on is written: completely, or not at all.

Everything is written under a temporary name in the destination folder, flushed to disk
(fsync of the file, or of every file of a folder), renamed into place, and the folder holding it
is fsynced so the rename itself survives a crash. A reader therefore sees the previous version or
the new one, never a torn file, also across a node crash and on network filesystems that honour
fsync. Used for results.json, metrics.csv rewrites, checkpoints (files and folders), data caches,
pre-tokenized shards, evaluation records and benchmark reports.

A write that fails, for any reason (a full disk, a quota, Ctrl-C), removes its temporary file or
folder before the error goes on, so a full disk does not stay full of half-written copies; one that
found no room (errors.WriteFailed: ENOSPC, EDQUOT, EFBIG, EROFS) names the destination path.
Written files get the mode a plain open() gives (0666 minus the umask), folders 0777 minus it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import WriteFailed

# mkstemp/mkdtemp create 0600/0700 entries; a record file must get the mode a plain open() would
# (0666/0777 minus the umask), or a shared cache or pre-tokenized folder becomes unreadable to others.
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE, DIR_MODE = 0o666 & ~_UMASK, 0o777 & ~_UMASK


def plain_modes(folder: str | os.PathLike) -> None:
    """Give every file under `folder` FILE_MODE and every folder DIR_MODE: for folders filled by
    other libraries (transformers' save_pretrained writes model.safetensors 0600)."""
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), DIR_MODE)
        for name in files:
            os.chmod(os.path.join(root, name), FILE_MODE)


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file, or a folder and every file below it, to disk."""
    path = Path(path)
    if path.is_dir():
        for root, _dirs, files in os.walk(path):
            for name in files:
                _fsync_fd(Path(root) / name, os.O_RDONLY)
            _fsync_dir(Path(root))
    else:
        _fsync_fd(path, os.O_RDONLY)


def _fsync_fd(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        _fsync_fd(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # some filesystems cannot fsync a directory; the rename is still atomic there
        pass


def displaced(final: str | os.PathLike) -> Path:
    """Where `place` parks the folder it replaces until the new one is in (a kill in between
    leaves only this one)."""
    final = Path(final)
    return final.with_name(final.name + ".old")


def place(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Move a finished temporary file or folder over `final` (same filesystem), durably.

    A folder replaces an existing folder through a `.old` rename, so `final` is never missing for
    longer than the gap between two renames and never half-written.
    """
    tmp, final = Path(tmp), Path(final)
    fsync_path(tmp)
    if tmp.is_dir():
        old = displaced(final)
        if final.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(final.parent)


def discard(tmp: str | os.PathLike) -> None:
    """Remove a temporary file or folder a write left; never raises, so the write's own error is
    the one that is reported."""
    tmp = Path(tmp)
    try:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:
        pass


def named(err: BaseException, path: str | os.PathLike) -> BaseException:
    """The error a failed write of `path` raises: a write that found no room names `path`
    (WriteFailed); anything else goes on unchanged."""
    return WriteFailed.of(err, path) or err


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[Any]:
    """`with atomic_file(p) as fh: fh.write(...)`: p holds all of it, or keeps its old content."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would hide the file from other users
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    except BaseException as err:
        if tmp is not None:
            discard(tmp)
        failed = named(err, path)
        if failed is not err:
            raise failed from err
        raise


@contextmanager
def atomic_dir(path: str | os.PathLike, keep_existing: bool = False) -> Iterator[Path]:
    """`with atomic_dir(p) as tmp: write files into tmp`: then tmp becomes p in one rename.

    keep_existing=True is for caches that several processes may build at once (every rank of a
    first distributed run): the first copy to arrive wins and is never moved, later copies are
    discarded, so a reader that already holds the cache never sees it disappear.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        os.chmod(tmp, DIR_MODE)
        yield tmp
        if not keep_existing:
            place(tmp, path)
        elif not path.exists():
            fsync_path(tmp)
            try:
                os.rename(tmp, path)  # fails when another process's copy arrived first: keep that one
            except OSError:
                if not path.exists():
                    raise
            _fsync_dir(path.parent)
    except BaseException as err:
        failed = named(err, path)
        if failed is not err:
            raise failed from err
        raise
    finally:
        if tmp.exists():
            discard(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_file(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_json(path: str | os.PathLike, data: Mapping[str, Any] | list[Any]) -> None:
    with atomic_file(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, default=str)
        fh.write("\n")
