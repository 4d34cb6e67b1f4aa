"""Corpus -> tokenizer -> token memmaps, cached by content, and the batches Lightning trains on.

Preparation (once per (corpus, tokenizer settings)):
  1. read the documents as the sharded path does (corpus.load_documents) and split them into
     train / held-out validation *by document*, by the rule data.split names (split.py; the
     built-in and local-file configs: `shuffle`, a seeded shuffle until val_fraction of the characters),
  2. train a byte-level BPE tokenizer on the training documents with HF `tokenizers`,
  3. tokenize each document, append end-of-text, write `train.bin` / `val.bin` as flat memmaps
     (uint16 when V <= 65,536, else uint32),
  4. write `meta.json` (counts, bytes, unigram perplexity of the validation split),
     `token_bytes.npy` (UTF-8 bytes per token, for bits-per-byte) and `val_docs.jsonl`.
Everything is built in a temporary directory and renamed into place, so concurrent jobs never
see (or corrupt) a half-written cache; the loser of a race simply discards its copy. Building is
also serialised by a lock file beside the cache (`_building`): jobs started side by side (a
parallel sweep, several sweeps at once) wait for the first one's cache instead of tokenizing the
same corpus at the same time, and a sharded cache (which is completed in place, piece by piece) is
never pre-tokenized by two processes at once.

Large sources (`hf`, `mixture`) are pre-tokenized into shards instead (shards.py), in the
same cache; `source: pretokenized` trains from a directory the pretokenize command wrote. Both
give a PreparedData with several train shards (`train_shards`) and one merged `val.bin`. The two
paths share the document reader, the split rule, the cache key scheme (layout.cache_key) and the
unigram reference (split.unigram_val_ppl): a corpus given to either under one data.split holds
out the same documents. They differ in where tokens go (one train.bin vs shards), in the order of
the held-out documents (by name here, in corpus order there) and in the BPE's training text (all
training documents here, the first tokenizer_train_mb of them there).

The tokenizer is a byte-level BPE trained here (`data.tokenizer: bpe`, the default) or any
Hugging Face tokenizer (tokenizer.py).

The batches trained on are built from these files in batches.py.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ..errors import ConfigError
from ..record.atomic import atomic_dir
from ..turns import give_turn, take_turn
from . import layout
from .corpus import IN_MEMORY_SOURCES, Document, load_documents
from .split import IN_MEMORY_KEY_RULE, SHARDED_KEY_RULE, Split, key_settings, unigram_val_ppl
from .tokenizer import (
    EOT,
    encode_documents,
    is_pretrained,
    load_pretrained,
    storage_dtype,
    tokenizer_sha256,
)
from .tokenizer import (
    token_byte_lengths as token_byte_lengths,  # re-exported: bytes per token id
)
from .tokenizer import train_bpe as _train_bpe

PREP_VERSION = 1  # bump when the preparation logic changes, so stale caches are not reused
# Pre-tokenized shards without their recorded counts: how many training tokens train_token_counts reads.
TRAIN_COUNT_LIMIT = 1 << 27


@dataclass(frozen=True)
class TrainShard:
    path: Path
    tokens: int
    stream: str  # mixture entry it came from; sampling weights are per stream


@dataclass
class PreparedData:
    """A ready-to-train cache directory and what is known about it."""

    root: Path
    meta: dict[str, Any]

    def __post_init__(self) -> None:
        # A cache written before data.split existed: the rule its layout was split by (split.py).
        if "split" not in self.meta:
            settings = self.meta.get("settings") or {}
            self.meta["split"] = settings.get("split", SHARDED_KEY_RULE) if self.sharded else IN_MEMORY_KEY_RULE

    @property
    def sharded(self) -> bool:
        return "shards" in self.meta

    @property
    def train_path(self) -> Path:
        """The single train memmap of an in-memory preparation (sharded data: see train_shards)."""
        if self.sharded:
            raise ValueError(f"{self.root} is sharded; use PreparedData.train_shards")
        return self.root / layout.TRAIN_TOKENS

    @property
    def train_shards(self) -> list[TrainShard]:
        if not self.sharded:
            return [TrainShard(self.root / layout.TRAIN_TOKENS, int(self.meta["train_tokens"]), self.meta.get("source", "train"))]
        return [TrainShard(self.root / s["path"], int(s["tokens"]), s["stream"]) for s in self.meta["shards"]]

    @property
    def stream_weights(self) -> dict[str, float]:
        """Sampling weight of each stream (normalised by the sampler); one stream: {name: 1}."""
        weights = self.meta.get("stream_weights")
        return dict(weights) if weights else {s.stream: 1.0 for s in self.train_shards}

    @property
    def val_segments(self) -> list[tuple[str, int, int]]:
        """(source, start, end) token ranges of the held-out split, one per source, in file order.

        In-memory preparations hold one source. Pre-tokenized directories record the ranges (their
        split is stratified by stream, shards.val_quotas); a directory written before that holds
        the first shards' held-out tokens in piece order, whose ranges follow from the shard list.
        """
        if not self.sharded:
            return [(self.train_shards[0].stream, 0, int(self.meta["val_tokens"]))]
        if "val_segments" in self.meta:
            return [(seg["stream"], int(seg["start"]), int(seg["end"])) for seg in self.meta["val_segments"]]
        segments: list[tuple[str, int, int]] = []
        written, total = 0, int(self.meta["val_tokens"])
        for shard in self.meta["shards"]:
            n = min(int(shard["val_tokens"]), total - written)
            if n <= 0:
                continue
            if segments and segments[-1][0] == shard["stream"]:
                segments[-1] = (shard["stream"], segments[-1][1], written + n)
            else:
                segments.append((shard["stream"], written, written + n))
            written += n
        return segments

    @property
    def val_path(self) -> Path:
        return self.root / layout.VAL_TOKENS

    @property
    def tokenizer_path(self) -> Path:
        return self.root / layout.TOKENIZER

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    def tokens(self, split: str) -> np.memmap:
        path = {"train": self.train_path, "val": self.val_path}[split]
        return np.memmap(path, dtype=self.dtype, mode="r")

    def token_bytes(self) -> np.ndarray:
        return np.load(self.root / layout.TOKEN_BYTES)

    def train_token_counts(self, limit: int = TRAIN_COUNT_LIMIT) -> tuple[np.ndarray, dict[str, Any]]:
        """(V,) int64 count of each token id in the training split, and how it was counted.

        In-memory data: every token of train.bin. Pre-tokenized shards: the counts each shard
        recorded when it was written (shards/NNNNN.counts.npy, the whole split), or where a shard
        lacks them, the first `limit` tokens of the shards in order. The record says which:
        {"counted_tokens", "train_tokens", "source": "all tokens" | "shard counts" | "shard prefix"}.
        """
        vocab = int(self.meta["vocab_size"])
        counts = np.zeros(vocab, dtype=np.int64)

        def add(values: np.ndarray) -> None:
            counts[:] += np.bincount(values, minlength=vocab)[:vocab]

        shards = self.train_shards
        total = sum(s.tokens for s in shards)
        counted, source = 0, "all tokens"
        if self.sharded:
            files = [layout.shard_files(self.root, int(s["index"]))["counts"] for s in self.meta["shards"]]
            if all(f.exists() for f in files):
                for f in files:
                    recorded = np.load(f)[:vocab]  # (tokenizer vocab,) int64
                    counts[: recorded.size] += recorded
                how = {"counted_tokens": int(counts.sum()), "train_tokens": int(total), "source": "shard counts"}
                return counts, how
            source = "shard prefix"
        for shard in shards:
            take = shard.tokens if source == "all tokens" else min(shard.tokens, int(limit) - counted)
            if take <= 0:
                break
            tokens = np.memmap(shard.path, dtype=self.dtype, mode="r")
            for start in range(0, take, 1 << 24):  # bounded memory for bincount's int64 copy
                add(np.asarray(tokens[start : min(take, start + (1 << 24))]))
            counted += take
        return counts, {"counted_tokens": int(counted), "train_tokens": int(total), "source": source}


def _split_by_document(docs: list[Document], split: Split) -> tuple[list[Document], list[Document]]:
    """(train, held-out) documents by the split's rule; train in corpus order, held-out by name."""
    held = split.held_out((d.name, len(d.text)) for d in docs)
    train = [d for d in docs if d.name not in held]
    val = sorted((d for d in docs if d.name in held), key=lambda d: d.name)
    if not train or not val:
        raise ConfigError(
            "data.val_fraction", f"{split.fraction} leaves an empty split for {len(docs)} documents",
            "use more documents or a val_fraction between 0 and 1",
        )
    return train, val


def train_bpe(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 style) with one special token, id 0 = end-of-text."""
    return _train_bpe(texts, vocab_size, length=len(texts))


def _write_tokens(path: Path, tok, docs: list[Document], eot: int, dtype: np.dtype) -> np.ndarray:
    flat = encode_documents(tok, [d.text for d in docs], eot, dtype)
    flat.tofile(path)
    return flat


def load_pretokenized(root: str | os.PathLike, vocab_size: int | None = None,
                      weights: Mapping[str, float] | None = None, field: str = "data.dir") -> PreparedData:
    """A directory written by the pretokenize command, checked to be complete and to fit the model."""
    root = Path(os.path.expanduser(str(root)))
    manifest = root / layout.MANIFEST
    if not manifest.exists():
        state = f"is incomplete (no {layout.MANIFEST} yet)" if (root / layout.PLAN).exists() else "is not a pre-tokenized directory"
        raise ConfigError(field, f"{root} {state}",
                          "run `fixedcode pretokenize ... out=DIR` (it resumes, keeping finished shards)")
    meta = json.loads(manifest.read_text())
    missing = [s["path"] for s in meta["shards"] if not (root / s["path"]).exists()]
    if missing:
        raise ConfigError(field, f"{root} lacks {len(missing)} shard(s), e.g. {missing[0]}",
                          "rerun the pretokenize command on it to redo them")
    if vocab_size is not None:
        if meta["tokenizer_vocab_size"] > int(vocab_size):
            raise ConfigError("model.vocab_size", f"{vocab_size} is smaller than the tokenizer of {root} "
                              f"({meta['tokenizer_vocab_size']} tokens)", f"use a model with vocab_size >= {meta['tokenizer_vocab_size']}")
        meta["vocab_size"] = int(vocab_size)
    if weights:
        unknown = set(weights) - set(meta["stream_weights"])
        if unknown:
            raise ConfigError("data.weights", f"unknown stream(s) {sorted(unknown)}", f"use {sorted(meta['stream_weights'])}")
        meta["stream_weights"] = {**meta["stream_weights"], **{k: float(v) for k, v in weights.items()}}
    if len(meta["stream_weights"]) > 1:
        if "val_segments" not in meta:
            print(f"[data] the held-out split of {root} predates stratification by stream: it holds the first "
                  "shards' held-out tokens only; rerun the pretokenize command on it (or call "
                  "fixedcode_study.data.shards.restratify on the directory) to stratify it")
        elif _shares(meta["stream_weights"]) != _shares(meta["val_weights"]):
            print(f"[data] training weights {meta['stream_weights']} differ from the weights the held-out split was "
                  f"drawn with {meta['val_weights']}: val/loss weighs sources by the latter, val/loss@<source> by neither")
    return PreparedData(root, meta)


def _shares(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(float(w) for w in weights.values())
    return {k: round(float(w) / total, 12) for k, w in weights.items()}


def _prepare_sharded(cfg: Mapping[str, Any], progress: bool) -> PreparedData:
    """hf / mixture sources: pre-tokenize into the cache (resuming if interrupted), then load."""
    from .shards import default_out_dir, pretokenize, restratify

    out = default_out_dir(cfg)
    manifest = layout.read_manifest(out)
    if manifest is None or "val_segments" not in manifest:
        with _building(out, progress):
            manifest = layout.read_manifest(out)  # another process may have finished it meanwhile
            if manifest is None:
                pretokenize(cfg, out, workers=int(cfg.get("workers") or 0), progress=progress)
            elif "val_segments" not in manifest:
                # A cache from before the held-out split was stratified by stream: rebuilt from its
                # own shards (no network, unlike planning the sources again).
                restratify(out)
    weights = {name: entry.get("weight", 1.0) for name, entry in (cfg.get("mixture") or {}).items()}
    return load_pretokenized(out, cfg.get("vocab_size"), weights or None, field="data")


def _load_tokenizer(cfg: Mapping[str, Any], train_docs: list[Document], vocab_size: int):
    """(tokenizer, end-of-text id): BPE trained on the train documents, or a pretrained one."""
    if is_pretrained(cfg.get("tokenizer")):
        loaded = load_pretrained(str(cfg["tokenizer"]), cfg.get("tokenizer_revision"), cfg.get("eot_token"))
        if loaded.vocab_size > vocab_size:
            raise ConfigError("data.vocab_size", f"{vocab_size} is smaller than the tokenizer ({loaded.vocab_size} tokens)",
                              f"use a model with vocab_size >= {loaded.vocab_size}")
        return loaded.tokenizer, loaded.eot_id
    tok = train_bpe([d.text for d in train_docs], vocab_size)
    return tok, tok.token_to_id(EOT)


def prepare(cfg: Mapping[str, Any], progress: bool = True) -> PreparedData:
    """Return the cached preparation for this data config, building it if absent."""
    source = cfg["source"]
    if source == "pretokenized":
        if not cfg.get("dir"):
            raise ConfigError("data.dir", "data.source=pretokenized needs the directory", "set data.dir=DIR written by the pretokenize command")
        return _check_split(cfg, load_pretokenized(cfg["dir"], cfg.get("vocab_size"), cfg.get("weights")))
    if source not in IN_MEMORY_SOURCES:
        return _prepare_sharded(cfg, progress)
    plan = plan_in_memory(cfg)
    if (cached := layout.read_meta(plan.folder)) is not None:
        return PreparedData(plan.folder, cached)
    with _building(plan.folder, progress):
        if (cached := layout.read_meta(plan.folder)) is not None:  # built by the process we waited for
            return PreparedData(plan.folder, cached)
        return _prepare_in_memory(cfg, plan, progress)


@dataclass(frozen=True)
class InMemoryPlan:
    """What an in-memory preparation is made of and where it is cached, before anything is built."""

    docs: list[Document]
    split: Split
    settings: dict[str, Any]  # what decides the contents besides the documents (meta.json holds them)
    key: str
    folder: Path


def plan_in_memory(cfg: Mapping[str, Any]) -> InMemoryPlan:
    """Read the documents of a shakespeare / text_files config and work out its cache key and folder."""
    source = cfg["source"]
    vocab_size = int(cfg["vocab_size"])
    pretrained = is_pretrained(cfg.get("tokenizer"))
    if vocab_size < 257 and not pretrained:
        raise ConfigError("data.vocab_size", f"{vocab_size} is below the 256 byte tokens + end-of-text", "use >= 257")
    split = Split.from_config(cfg)
    docs = load_documents(source, cfg.get("paths") or (), cfg.get("doc_separator"), cfg.get("text_field") or "text",
                          cfg.get("keep_between"))
    settings = {
        "source": source, "vocab_size": vocab_size, "val_fraction": split.fraction,
        "split_seed": split.seed, **key_settings(split.rule, IN_MEMORY_KEY_RULE), "tokenizer": "bytelevel_bpe",
    }
    if pretrained:  # keyed by the tokenizer's content, so a changed tokenizer never reuses old tokens
        settings["tokenizer"] = {"pretrained": str(cfg["tokenizer"]), "sha256": tokenizer_sha256(
            load_pretrained(str(cfg["tokenizer"]), cfg.get("tokenizer_revision"), cfg.get("eot_token")).tokenizer)}
    key = layout.cache_key({**settings, "prep_version": PREP_VERSION}, docs)
    return InMemoryPlan(docs, split, settings, key, layout.cache_folder(cfg["cache_dir"], source, key, sharded=False))


def _check_split(cfg: Mapping[str, Any], prepared: PreparedData) -> PreparedData:
    """A pre-tokenized directory's split was fixed when it was written: a different data.split is refused."""
    wanted = cfg.get("split")
    if wanted is not None and wanted != prepared.meta["split"]:
        raise ConfigError("data.split", f"{prepared.root} was pre-tokenized with split {prepared.meta['split']!r}, not {wanted!r}",
                          f"drop data.split, or pre-tokenize the corpus again with data.split={wanted}")
    return prepared


@contextmanager
def _building(cache: Path, progress: bool) -> Iterator[None]:
    """Hold the turn to build `cache` (the lock file .<name>.lock beside it, turns.py) while building
    it, waiting for another process that holds it; unserialised where the filesystem has no flock."""
    def waiting() -> None:
        if progress:
            print(f"[data] waiting for another process that is preparing {cache}", flush=True)

    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(layout.build_lock(cache), "a+") as fh:
        if take_turn(fh, waiting) is None:
            yield
            return
        try:
            yield
        finally:
            give_turn(fh)


def _prepare_in_memory(cfg: Mapping[str, Any], plan: InMemoryPlan, progress: bool) -> PreparedData:
    source, docs, final, vocab_size = cfg["source"], plan.docs, plan.folder, int(cfg["vocab_size"])
    t0 = time.time()
    say = print if progress else (lambda *a, **k: None)
    # Built in a temporary folder and renamed into place: readers see the whole cache or none of
    # it, and when two jobs race the loser discards its copy (keep_existing).
    with atomic_dir(final, keep_existing=True) as tmp:
        say(f"[data] preparing {source} ({len(docs)} documents) -> {final}")
        train_docs, val_docs = _split_by_document(docs, plan.split)
        tok, eot = _load_tokenizer(cfg, train_docs, vocab_size)
        say(f"[data] tokenizer ready: {tok.get_vocab_size()} tokens ({time.time() - t0:.1f}s)")
        dtype = storage_dtype(vocab_size)
        train = _write_tokens(tmp / layout.TRAIN_TOKENS, tok, train_docs, eot, dtype)
        val = _write_tokens(tmp / layout.VAL_TOKENS, tok, val_docs, eot, dtype)
        tok.save(str(tmp / layout.TOKENIZER))
        tbytes = token_byte_lengths(tok, vocab_size)
        np.save(tmp / layout.TOKEN_BYTES, tbytes)
        with open(tmp / layout.VAL_DOCS, "w", encoding="utf-8") as fh:
            for d in val_docs:
                fh.write(json.dumps({"name": d.name, "text": d.text}) + "\n")
        meta = {
            **plan.settings,
            "split": plan.split.rule,
            "cache_key": plan.key,
            "tokenizer_vocab_size": tok.get_vocab_size(),
            "eot_id": eot,
            "dtype": dtype.name,
            "documents": {"train": len(train_docs), "val": len(val_docs)},
            "train_tokens": int(train.size),
            "val_tokens": int(val.size),
            "train_bytes": sum(len(d.text.encode()) for d in train_docs),
            "val_bytes": sum(len(d.text.encode()) for d in val_docs),
            "unigram_val_ppl": unigram_val_ppl(np.bincount(train, minlength=vocab_size), val),
            "seconds": round(time.time() - t0, 2),
        }
        (tmp / layout.META).write_text(json.dumps(meta, indent=2))
    say(f"[data] {meta['train_tokens']:,} train / {meta['val_tokens']:,} val tokens ({meta['seconds']}s)")
    return PreparedData(final, layout.read_meta(final))
