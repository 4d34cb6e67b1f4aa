"""File names of a prepared data folder, spelled once.

Two writers share one layout, so the trainer reads both the same way (prepare.PreparedData):
an in-memory preparation (prepare.py) and a pre-tokenized directory (shards.py).

    train.bin         training tokens (in-memory preparation; pre-tokenized data has shards/)
    val.bin           held-out tokens
    tokenizer.json    the tokenizer every token was made with
    token_bytes.npy   UTF-8 bytes per token ID (bits per byte)
    meta.json         what prepare.py knows about its cache (counts, cache_key, ...)
    val_docs.jsonl    held-out documents as text (the built-in evaluation tasks read them)
    manifest.json     a finished pre-tokenized directory's shard list (written last)
    plan.json         a pre-tokenized directory's settings and pieces (written first)
    shards/           a pre-tokenized directory's per-piece files
    ../.<name>.lock   beside the folder: held while one process builds it (prepare.py)

Both are found in the data cache by one key scheme (`cache_key`, `cache_folder`): a hash of the
settings that decide the folder's contents, plus, for an in-memory preparation, the documents
themselves (a sharded source is too large to hash; its plan.json records each input file's size
and mtime instead, checked on every restart).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..record.jobdir import LOCK_FILE

TRAIN_TOKENS = "train.bin"
VAL_TOKENS = "val.bin"
TOKENIZER = "tokenizer.json"
TOKEN_BYTES = "token_bytes.npy"
META = "meta.json"
VAL_DOCS = "val_docs.jsonl"
MANIFEST = "manifest.json"
PLAN = "plan.json"
SHARDS = "shards"


def cache_key(settings: Mapping[str, Any], documents: Iterable[Any] = ()) -> str:
    """20 hex digits of sha256 over the settings (JSON, sorted keys) and each document's name and text."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for d in documents:
        h.update(d.name.encode() + b"\0" + d.text.encode("utf-8") + b"\0")
    return h.hexdigest()[:20]


def cache_folder(cache_dir: str | os.PathLike | None, stem: str, key: str, sharded: bool) -> Path:
    """<cache_dir>/<stem>-<key> (in memory) or <cache_dir>/<stem>-pretok-<key> (pre-tokenized shards)."""
    root = Path(os.path.expanduser(str(cache_dir or "~/.cache/fixedcode_study")))
    return root / (f"{stem}-pretok-{key}" if sharded else f"{stem}-{key}")


def build_lock(root: str | Path) -> Path:
    """The lock file held while `root` is being built, beside it (the folder itself appears by rename)."""
    root = Path(root)
    return root.parent / f".{root.name}{LOCK_FILE}"  # the same lock suffix as a job directory's


def shard_files(root: str | Path, index: int) -> dict[str, Path]:
    """The files of pre-tokenized piece `index`: its train and held-out tokens, the train token
    counts, and the done marker written last."""
    stem = Path(root) / SHARDS / f"{index:05d}"
    return {"train": Path(f"{stem}.train.bin"), "val": Path(f"{stem}.val.bin"),
            "counts": Path(f"{stem}.counts.npy"), "marker": Path(f"{stem}.json")}


def read_meta(root: str | Path) -> dict[str, Any] | None:
    """meta.json of a prepared cache folder, or None when the folder holds no finished cache."""
    path = Path(root) / META
    return json.loads(path.read_text()) if path.exists() else None


def read_manifest(root: str | Path) -> dict[str, Any] | None:
    """manifest.json of a pre-tokenized directory, or None while the directory is unfinished."""
    path = Path(root) / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None
