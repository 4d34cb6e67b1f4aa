"""Corpus -> tokenizer -> token memmaps, cached by content, and the batches Lightning trains on.

Preparation (once per (corpus, tokenizer settings)):
  1. split documents into train / held-out validation *by document* (seeded, by bytes),
  2. train a byte-level BPE tokenizer on the training documents with HF `tokenizers`,
  3. tokenize each document, append end-of-text, write `train.bin` / `val.bin` as flat memmaps
     (uint16 when V <= 65,536, else uint32),
  4. write `meta.json` (counts, bytes, unigram perplexity of the validation split),
     `token_bytes.npy` (UTF-8 bytes per token, for bits-per-byte) and `val_docs.jsonl`.
Everything is built in a temporary directory and renamed into place, so concurrent jobs never
see (or corrupt) a half-written cache; the loser of a race simply discards its copy.

The batches trained on are built from these files in batches.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .corpus import Document, load_documents
from .errors import ConfigError

PREP_VERSION = 1  # bump when the preparation logic changes, so stale caches are not reused
EOT = "<|endoftext|>"


@dataclass
class PreparedData:
    """A ready-to-train cache directory and what is known about it."""

    root: Path
    meta: dict[str, Any]

    @property
    def train_path(self) -> Path:
        return self.root / "train.bin"

    @property
    def val_path(self) -> Path:
        return self.root / "val.bin"

    @property
    def tokenizer_path(self) -> Path:
        return self.root / "tokenizer.json"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    def tokens(self, split: str) -> np.memmap:
        return np.memmap(self.root / f"{split}.bin", dtype=self.dtype, mode="r")

    def token_bytes(self) -> np.ndarray:
        return np.load(self.root / "token_bytes.npy")


def _split_by_document(docs: list[Document], val_fraction: float, seed: int) -> tuple[list[Document], list[Document]]:
    """Seeded shuffle of documents; take whole documents for validation until val_fraction of bytes."""
    order = np.random.default_rng(seed).permutation(len(docs))
    total = sum(len(d.text) for d in docs)
    val, val_bytes = [], 0
    for i in order:
        if val_bytes >= val_fraction * total:
            break
        val.append(docs[i])
        val_bytes += len(docs[i].text)
    val_names = {d.name for d in val}
    train = [d for d in docs if d.name not in val_names]
    if not train or not val:
        raise ConfigError(
            "data.val_fraction", f"{val_fraction} leaves an empty split for {len(docs)} documents",
            "use more documents or a val_fraction between 0 and 1",
        )
    return train, sorted(val, key=lambda d: d.name)


def train_bpe(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 style) with one special token, id 0 = end-of-text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def token_byte_lengths(tok, vocab_size: int) -> np.ndarray:
    """UTF-8 bytes each token stands for (0 for special tokens and unused IDs).

    In a byte-level BPE every character of a token's string is exactly one byte, so the length of
    the string is the byte count; other tokenizers fall back to decoding the single token.
    """
    specials = {t.content for t in tok.get_added_tokens_decoder().values()} if hasattr(tok, "get_added_tokens_decoder") else set()
    byte_level = type(tok.pre_tokenizer).__name__ == "ByteLevel"
    out = np.zeros(vocab_size, dtype=np.int32)
    for i in range(min(vocab_size, tok.get_vocab_size())):
        piece = tok.id_to_token(i)
        if piece is None or piece in specials:
            continue
        out[i] = len(piece) if byte_level else len(tok.decode([i]).encode("utf-8"))
    return out


def _unigram_ppl(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """Perplexity of an add-one unigram model fit on train, scored on every validation token."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(math.exp(-logp[val].mean()))


def _cache_key(docs: list[Document], settings: Mapping[str, Any]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({**settings, "prep_version": PREP_VERSION}, sort_keys=True).encode())
    for d in docs:
        h.update(d.name.encode() + b"\0" + d.text.encode("utf-8") + b"\0")
    return h.hexdigest()[:20]


def _write_tokens(path: Path, ids: list[list[int]], eot: int, dtype: np.dtype) -> np.ndarray:
    flat = np.fromiter((t for doc in ids for t in (*doc, eot)), dtype=dtype, count=sum(len(d) + 1 for d in ids))
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=flat.shape)
    mm[:] = flat
    mm.flush()
    return flat


def prepare(cfg: Mapping[str, Any], progress: bool = True) -> PreparedData:
    """Return the cached preparation for this data config, building it if absent."""
    vocab_size = int(cfg["vocab_size"])
    if vocab_size < 257:
        raise ConfigError("data.vocab_size", f"{vocab_size} is below the 256 byte tokens + end-of-text", "use >= 257")
    docs = load_documents(cfg["source"], cfg.get("paths") or (), cfg.get("doc_separator"))
    settings = {
        "source": cfg["source"], "vocab_size": vocab_size, "val_fraction": float(cfg["val_fraction"]),
        "split_seed": int(cfg["split_seed"]), "tokenizer": "bytelevel_bpe",
    }
    key = _cache_key(docs, settings)
    cache_root = Path(os.path.expanduser(str(cfg["cache_dir"])))
    final = cache_root / f"{cfg['source']}-{key}"
    if (final / "meta.json").exists():
        return PreparedData(final, json.loads((final / "meta.json").read_text()))

    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=cache_root))
    try:
        t0 = time.time()
        say = print if progress else (lambda *a, **k: None)
        say(f"[data] preparing {cfg['source']} ({len(docs)} documents) -> {final}")
        train_docs, val_docs = _split_by_document(docs, settings["val_fraction"], settings["split_seed"])
        tok = train_bpe([d.text for d in train_docs], vocab_size)
        say(f"[data] tokenizer trained: {tok.get_vocab_size()} tokens ({time.time() - t0:.1f}s)")
        eot = tok.token_to_id(EOT)
        dtype = np.dtype(np.uint16 if vocab_size <= 65_536 else np.uint32)
        enc = lambda ds: [e.ids for e in tok.encode_batch([d.text for d in ds])]  # noqa: E731
        train = _write_tokens(tmp / "train.bin", enc(train_docs), eot, dtype)
        val = _write_tokens(tmp / "val.bin", enc(val_docs), eot, dtype)
        tok.save(str(tmp / "tokenizer.json"))
        tbytes = token_byte_lengths(tok, vocab_size)
        np.save(tmp / "token_bytes.npy", tbytes)
        with open(tmp / "val_docs.jsonl", "w", encoding="utf-8") as fh:
            for d in val_docs:
                fh.write(json.dumps({"name": d.name, "text": d.text}) + "\n")
        meta = {
            **settings,
            "cache_key": key,
            "tokenizer_vocab_size": tok.get_vocab_size(),
            "eot_id": eot,
            "dtype": dtype.name,
            "documents": {"train": len(train_docs), "val": len(val_docs)},
            "train_tokens": int(train.size),
            "val_tokens": int(val.size),
            "train_bytes": sum(len(d.text.encode()) for d in train_docs),
            "val_bytes": sum(len(d.text.encode()) for d in val_docs),
            "unigram_val_ppl": _unigram_ppl(train, val, vocab_size),
            "seconds": round(time.time() - t0, 2),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        try:
            os.rename(tmp, final)  # atomic: readers see the whole cache or none of it
        except OSError:
            if not (final / "meta.json").exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another job finished first; use its copy
        say(f"[data] {meta['train_tokens']:,} train / {meta['val_tokens']:,} val tokens ({meta['seconds']}s)")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return PreparedData(final, json.loads((final / "meta.json").read_text()))
