"""Pre-tokenize a data source into memmap shards with several worker processes, restartably.

The command line is `fixedcode pretokenize` (fixedcode_study/cli/pretokenize.py):

    fixedcode pretokenize data=text_files 'data.paths=[../shared/data/corpus/gutenberg/*.txt]' \
        data.vocab_size=8192 workers=2 out=/data/gutenberg-bpe8k
    fixedcode pretokenize data=paper_mix workers=32       # into the data cache
    python -m fixedcode_study.run data=pretokenized data.dir=/data/gutenberg-bpe8k ...

Any data config works (the same conf/data group training uses; the arguments are Hydra
overrides). The output directory holds:
  plan.json                  settings + the pieces of input (corpus.plan_pieces), fixed at the start
  tokenizer.json             the tokenizer every shard was made with (trained BPE or a HF one)
  shards/NNNNN.train.bin     tokens of piece N's training documents, each followed by end-of-text
  shards/NNNNN.val.bin       the same for its held-out documents, chosen by data.split (split.py):
                             `name_hash` decides each document by its name alone; `shuffle` reads
                             the corpus once first to choose them; either way the split is the
                             one an in-memory preparation of the corpus holds out, and never
                             depends on pieces or workers
  shards/NNNNN.counts.npy    token counts of the train shard (for the unigram baseline)
  shards/NNNNN.json          done marker, written last; a piece is finished iff its marker exists,
                             names the current tokenizer hash and the shard sizes match
  val.bin, token_bytes.npy   merged validation split and bytes per token ID: each stream's held-out
                             tokens in proportion to its mixture weight (up to max_val_tokens in all),
                             one stream after the other; manifest val_segments says which range is whose
  manifest.json              shard list, token counts, tokenizer hash: written atomically, last.
Every file is written under a temporary name and renamed, so a killed run leaves only finished
shards under their final names; rerunning skips them and redoes the rest.
"""

from __future__ import annotations

import functools
import json
import math
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ..errors import ConfigError
from ..record import atomic
from .corpus import Stream, piece_documents, plan_pieces, streams_from_config
from .layout import (
    MANIFEST,
    PLAN,
    SHARDS,
    TOKEN_BYTES,
    TOKENIZER,
    VAL_TOKENS,
    cache_folder,
    cache_key,
    shard_files,
)
from .split import NAME_HASH, SHARDED_KEY_RULE, HeldOut, Split, key_settings, unigram_val_ppl
from .tokenizer import (
    EOT,
    LoadedTokenizer,
    encode_documents,
    is_pretrained,
    load_pretrained,
    storage_dtype,
    token_byte_lengths,
    tokenizer_sha256,
    train_bpe,
)

PRETOK_VERSION = 1  # bump when shard contents would change for the same settings
DEFAULTS = {"shard_mb": 64, "tokenizer_train_mb": 256, "max_val_tokens": None, "val_fraction": 0.03,
            "split_seed": 0, "tokenizer": "bpe", "tokenizer_revision": None, "eot_token": None}
_ENCODE_BATCH_BYTES = 4 << 20  # documents are encoded in batches of about this much text


def _opt(cfg: Mapping[str, Any], key: str) -> Any:
    value = cfg.get(key)
    return DEFAULTS[key] if value is None else value


def settings_for(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Everything that decides the shards' contents (sampling weights do not: they apply at training)."""
    streams = streams_from_config(cfg)
    tokenizer = str(_opt(cfg, "tokenizer"))
    split = _split(cfg)
    settings = {
        "prep_version": PRETOK_VERSION, "source": cfg["source"],
        "streams": [_stream_settings(s, split.rule) for s in streams],
        "tokenizer": tokenizer, "val_fraction": split.fraction, "split_seed": split.seed,
        **key_settings(split.rule, SHARDED_KEY_RULE),
        "shard_mb": float(_opt(cfg, "shard_mb")), "max_val_tokens": cfg.get("max_val_tokens"),
    }
    if is_pretrained(tokenizer):
        settings.update(tokenizer_revision=cfg.get("tokenizer_revision"), eot_token=cfg.get("eot_token"))
    else:  # a trained BPE depends on its size and training sample
        settings.update(vocab_size=int(cfg["vocab_size"]), tokenizer_train_mb=float(_opt(cfg, "tokenizer_train_mb")))
    return settings


def _split(cfg: Mapping[str, Any]) -> Split:
    return Split.from_config(cfg, DEFAULTS["val_fraction"], DEFAULTS["split_seed"])


def _stream_settings(stream: Stream, rule: str) -> dict[str, Any]:
    entry = {"name": stream.name, "kind": stream.kind, "options": stream.options}
    relative = [p for p in stream.options.get("paths") or [] if not os.path.isabs(os.path.expanduser(str(p)))]
    if rule == NAME_HASH and stream.kind == "files" and relative:
        # name_hash hashes document names. Files matched by a relative glob were named by their
        # absolute path before both paths named documents as the glob matched them
        # (corpus.plan_pieces): other names, another split, so another key.
        entry["document_names"] = "as_matched"
    return entry


def settings_key(settings: Mapping[str, Any]) -> str:
    return cache_key(settings)


def default_out_dir(cfg: Mapping[str, Any]) -> Path:
    return cache_folder(cfg.get("cache_dir"), cfg.get("name") or cfg["source"], settings_key(settings_for(cfg)), sharded=True)


def held_out(split: Split, streams: list[Stream], pieces: list[dict[str, Any]], say=lambda *a, **k: None) -> HeldOut:
    """Which documents the split holds out. `shuffle` needs every document's size first: the
    pieces are read once here, each stream split on its own (in a mixture, each source keeps its share)."""
    if split.per_document:
        return split.membership()
    say(f"[pretokenize] split {split.rule}: reading {len(pieces)} pieces once to choose the held-out documents")
    names: set[str] = set()
    for stream in streams:
        names |= split.held_out((doc.name, len(doc.text)) for piece in pieces if piece["stream"] == stream.name
                                for doc in piece_documents(piece))
    return split.membership(names)


def _fingerprint(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pieces plus size and mtime of every input file, so changed inputs are noticed on restart."""
    out = []
    for p in pieces:
        files = sorted({item["file"] for item in p.get("items", [])})
        out.append({**p, "inputs": [[f, os.path.getsize(f), os.stat(f).st_mtime_ns] for f in files]} if files else p)
    return out


# -- tokenizer ----------------------------------------------------------------------------------
def _bpe_sample(streams: list[Stream], pieces: list[dict[str, Any]], settings: Mapping[str, Any],
                held: HeldOut) -> Iterable[str]:
    """Training documents for the BPE: the first ones of each stream, up to its weight's share of the budget."""
    budget = settings["tokenizer_train_mb"] * 1e6
    total_weight = sum(s.weight for s in streams)
    for stream in streams:
        left = budget * stream.weight / total_weight
        for piece in (p for p in pieces if p["stream"] == stream.name):
            for doc in piece_documents(piece):
                if left <= 0:
                    break
                if doc.name not in held:
                    left -= len(doc.text)
                    yield doc.text
            if left <= 0:
                break


def _ensure_tokenizer(out: Path, streams: list[Stream], pieces: list[dict[str, Any]],
                      settings: Mapping[str, Any], held: Callable[[], HeldOut], say) -> LoadedTokenizer:
    from tokenizers import Tokenizer

    path = out / TOKENIZER
    if is_pretrained(settings["tokenizer"]):
        loaded = load_pretrained(settings["tokenizer"], settings.get("tokenizer_revision"), settings.get("eot_token"))
        if not path.exists() or tokenizer_sha256(Tokenizer.from_file(str(path))) != loaded.sha256:
            atomic.write_text(path, loaded.tokenizer.to_str())
    elif not path.exists():  # trained once per output directory; a restart reuses it
        t0 = time.time()
        tok = train_bpe(_bpe_sample(streams, pieces, settings, held()), settings["vocab_size"])
        atomic.write_text(path, tok.to_str())
        say(f"[pretokenize] trained BPE, {tok.get_vocab_size()} tokens ({time.time() - t0:.1f}s)")
    tok = Tokenizer.from_file(str(path))  # the saved file is the source of truth for the hash
    eot = tok.token_to_id(EOT) if not is_pretrained(settings["tokenizer"]) else loaded.eot_id
    return LoadedTokenizer(tok, int(eot), settings["tokenizer"])


# -- one piece, in a worker process ---------------------------------------------------------------
def _init_worker() -> None:
    # Parallelism comes from worker processes; tokenizers' own thread pool would oversubscribe the cores.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"


def _tokenize_piece(job: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return _tokenize_piece_unsafe(job)
    except ConfigError as err:  # ConfigError does not survive pickling; send its parts back instead
        return {"config_error": [err.field, str(err)]}


def _tokenize_piece_unsafe(job: Mapping[str, Any]) -> dict[str, Any]:
    from tokenizers import Tokenizer

    t0, cpu0 = time.time(), time.process_time()
    out, index = Path(job["out"]), int(job["index"])
    paths = shard_files(out, index)
    tok = Tokenizer.from_file(job["tokenizer"])
    dtype, eot = np.dtype(job["dtype"]), int(job["eot_id"])
    counts = np.zeros(int(job["count_size"]), dtype=np.int64)
    stats = {split: {"tokens": 0, "documents": 0, "bytes": 0} for split in ("train", "val")}
    tmp = {k: p.with_name(f".{p.name}.tmp-{os.getpid()}") for k, p in paths.items()}
    files = {"train": open(tmp["train"], "wb"), "val": open(tmp["val"], "wb")}
    try:
        batch: dict[str, list[str]] = {"train": [], "val": []}
        batch_bytes = 0

        def flush() -> None:
            for split, texts in batch.items():
                if texts:
                    ids = encode_documents(tok, texts, eot, dtype)
                    ids.tofile(files[split])
                    if split == "train":
                        counts[:] += np.bincount(ids, minlength=counts.size)[: counts.size]
                    stats[split]["tokens"] += int(ids.size)
                    stats[split]["documents"] += len(texts)
                    stats[split]["bytes"] += sum(len(t.encode("utf-8")) for t in texts)
                    texts.clear()

        for doc in piece_documents(job["piece"]):
            batch["val" if doc.name in job["held_out"] else "train"].append(doc.text)
            batch_bytes += len(doc.text)
            if batch_bytes >= _ENCODE_BATCH_BYTES:
                flush()
                batch_bytes = 0
        flush()
    finally:
        for fh in files.values():
            fh.close()
    with open(tmp["counts"], "wb") as fh:
        np.save(fh, counts)
    for key in ("train", "val", "counts"):
        atomic.place(tmp[key], paths[key])
    marker = {
        "index": index, "stream": job["piece"]["stream"], "tokenizer_sha256": job["tokenizer_sha256"],
        "train": {"path": f"{SHARDS}/{paths['train'].name}", **stats["train"]},
        "val": {"path": f"{SHARDS}/{paths['val'].name}", **stats["val"]},
        "counts": f"{SHARDS}/{paths['counts'].name}", "seconds": round(time.time() - t0, 3),
        "cpu_seconds": round(time.process_time() - cpu0, 3),  # this process's CPU time (all its threads)
    }
    atomic.write_text(paths["marker"], json.dumps(marker, indent=1))  # last: the piece is now finished
    return marker


def _finished(out: Path, index: int, tokenizer_sha: str, itemsize: int) -> dict[str, Any] | None:
    paths = shard_files(out, index)
    try:
        marker = json.loads(paths["marker"].read_text())
    except (OSError, ValueError):
        return None
    ok = (marker.get("tokenizer_sha256") == tokenizer_sha and paths["counts"].exists()
          and all(paths[s].exists() and paths[s].stat().st_size == marker[s]["tokens"] * itemsize for s in ("train", "val")))
    return marker if ok else None


def _raise_worker_error(field: str, message: str) -> None:
    problem, _, fix = message[len(field) + 2:].rpartition("; ")
    raise ConfigError(field, problem, fix)


# -- the whole run ------------------------------------------------------------------------------
def val_quotas(available: Mapping[str, int], weights: Mapping[str, float], cap: int | None = None,
               say=lambda *a, **k: None) -> dict[str, int]:
    """Held-out tokens to take from each stream: proportional to the stream weights, as many as fit.

    The split's size is the largest total that every stream can supply its share of (a stream
    with few held-out documents shrinks it rather than being under-represented), cut at `cap`.
    A stream with no held-out tokens at all cannot be represented: it is left out, with a note.
    Exact rational arithmetic: with one stream the quota is min(available, cap), to the token.
    """
    present = {name: n for name, n in available.items() if n > 0}
    for name in available.keys() - present.keys():
        say(f"[pretokenize] stream {name!r} has no held-out document: validation cannot measure it "
            f"(raise val_fraction or give it more, smaller documents)")
    if not present:
        return {name: 0 for name in available}
    total_weight = sum(Fraction(float(weights[name])) for name in present)
    share = {name: Fraction(float(weights[name])) / total_weight for name in present}
    limit = min(Fraction(n) / share[name] for name, n in present.items())
    total = limit if cap is None else min(limit, Fraction(int(cap)))
    if cap is not None and limit < cap and len(present) > 1:
        short = min(present, key=lambda name: Fraction(present[name]) / share[name])
        say(f"[pretokenize] validation split: {int(total):,} tokens, below max_val_tokens={int(cap):,}: stream {short!r} "
            f"holds only {present[short]:,} held-out tokens for its {float(share[short]):.1%} share")
    return {name: (min(present[name], math.floor(total * share[name])) if name in present else 0) for name in available}


def _write_val_split(out: Path, weights: Mapping[str, float], shards: list[Mapping[str, Any]], cap: int | None,
                     dtype: np.dtype) -> dict[str, Any]:
    """Write the merged held-out split, stratified: each stream's held-out tokens in piece order, cut
    at its quota (val_quotas), one stream after the other (streams in `weights` order).

    Concatenating all shards in piece order and cutting at max_val_tokens, as before, filled the
    split from the first stream alone. With one stream the two are the same tokens.
    `shards`: {stream, val_path, val_tokens} in piece order. Returns the per-stream counts and the
    (stream, start, end) ranges written.
    """
    available = {name: 0 for name in weights}
    for shard in shards:
        available[shard["stream"]] += int(shard["val_tokens"])
    quotas = val_quotas(available, weights, cap, say=print)
    segments, written = [], 0
    with atomic.atomic_file(out / VAL_TOKENS, "wb") as fh:
        for name in weights:
            start, left = written, quotas[name]
            for shard in (s for s in shards if s["stream"] == name):
                if left <= 0:
                    break
                part = np.fromfile(out / shard["val_path"], dtype=dtype)[:left]
                part.tofile(fh)
                written += part.size
                left -= part.size
            if written > start:
                segments.append({"stream": name, "start": start, "end": written})
    return {"available": available, "quotas": quotas, "segments": segments, "tokens": written}


def restratify(out: str | os.PathLike) -> dict[str, Any]:
    """Rebuild the held-out split of a finished directory written before it was stratified by stream.

    Reads only the directory (its shards' held-out tokens and train counts): no input file, no
    network, no tokenizer. Updates the held-out numbers of the manifest and returns it.
    """
    out = Path(out)
    manifest = json.loads((out / MANIFEST).read_text())
    dtype = np.dtype(manifest["dtype"])
    weights = {name: float(w) for name, w in manifest["stream_weights"].items()}
    split = _write_val_split(out, weights, manifest["shards"], manifest["settings"].get("max_val_tokens"), dtype)
    val = np.fromfile(out / VAL_TOKENS, dtype=dtype)
    counts = np.zeros(int(manifest["tokenizer_vocab_size"]), dtype=np.int64)
    for shard in manifest["shards"]:
        counts += np.load(shard_files(out, shard["index"])["counts"])
    for name, totals in manifest["streams"].items():
        totals.update(val_tokens_held_out=split["available"][name], val_tokens=split["quotas"][name])
    manifest.update(val_segments=split["segments"], val_weights=weights, val_tokens=int(val.size),
                    val_bytes=int(np.load(out / TOKEN_BYTES)[val].sum(dtype=np.int64)), unigram_val_ppl=unigram_val_ppl(counts, val))
    atomic.write_text(out / MANIFEST, json.dumps(manifest, indent=1))
    return manifest


def _finalize(out: Path, cfg: Mapping[str, Any], settings: Mapping[str, Any], key: str, streams: list[Stream],
              markers: list[dict[str, Any]], tok: LoadedTokenizer, dtype: np.dtype, run: dict[str, Any]) -> dict[str, Any]:
    vocab = tok.vocab_size
    counts = np.zeros(vocab, dtype=np.int64)
    for m in markers:
        counts += np.load(out / m["counts"])
    weights = {s.name: s.weight for s in streams}
    split = _write_val_split(out, weights, [{"stream": m["stream"], "val_path": m["val"]["path"], "val_tokens": m["val"]["tokens"]}
                                            for m in markers], settings.get("max_val_tokens"), dtype)
    available, quotas, segments, written = split["available"], split["quotas"], split["segments"], split["tokens"]
    if written == 0:
        raise ConfigError("data.val_fraction", f"no document of {out} fell in the held-out split",
                          "raise val_fraction or use more, smaller documents (e.g. data.doc_separator)")
    val = np.fromfile(out / VAL_TOKENS, dtype=dtype)
    tbytes = token_byte_lengths(tok.tokenizer, vocab)
    with atomic.atomic_file(out / TOKEN_BYTES, "wb") as fh:
        np.save(fh, tbytes)

    stream_totals = {s.name: {"weight": s.weight, "shards": 0, "train_tokens": 0, "val_tokens_held_out": available[s.name],
                              "val_tokens": quotas[s.name]} for s in streams}
    for m in markers:
        stream_totals[m["stream"]]["shards"] += 1
        stream_totals[m["stream"]]["train_tokens"] += m["train"]["tokens"]
    total = lambda split, what: sum(m[split][what] for m in markers)  # noqa: E731
    manifest = {
        "format": "fixedcode-study pretokenized shards", "prep_version": PRETOK_VERSION,
        "name": cfg.get("name") or cfg["source"], "source": "pretokenized", "prepared_from": cfg["source"],
        "cache_key": key, "settings": settings, "split": _split(cfg).rule,
        "tokenizer": {"spec": tok.spec, "sha256": tok.sha256, "vocab_size": vocab, "eot_id": tok.eot_id, "file": TOKENIZER},
        "vocab_size": int(cfg.get("vocab_size") or vocab), "tokenizer_vocab_size": vocab, "eot_id": tok.eot_id,
        "dtype": dtype.name, "stream_weights": weights, "streams": stream_totals,
        # val.bin's token ranges per stream, and the weights they were drawn in proportion to
        "val_segments": segments, "val_weights": weights,
        "shards": [{"index": m["index"], "stream": m["stream"], "path": m["train"]["path"], "tokens": m["train"]["tokens"],
                    "val_path": m["val"]["path"], "val_tokens": m["val"]["tokens"]} for m in markers],
        "documents": {"train": total("train", "documents"), "val": total("val", "documents")},
        "train_tokens": total("train", "tokens"), "val_tokens": int(val.size),
        "train_bytes": total("train", "bytes"), "val_bytes": int(tbytes[val].sum(dtype=np.int64)),
        "unigram_val_ppl": unigram_val_ppl(counts, val), "last_run": run,
    }
    atomic.write_text(out / MANIFEST, json.dumps(manifest, indent=1))
    return manifest


def pretokenize(cfg: Mapping[str, Any], out_dir: str | os.PathLike | None = None, workers: int | None = None,
                progress: bool = True) -> dict[str, Any]:
    """Tokenize every unfinished piece of the configured source into `out_dir`; return the manifest.

    workers=0 tokenizes in this process (with tokenizers' own threads); workers>=1 uses that many
    spawned processes, one piece at a time each, one thread each.
    """
    say = print if progress else (lambda *a, **k: None)
    t_start = time.time()
    settings = settings_for(cfg)
    key = settings_key(settings)
    out = Path(os.path.expanduser(str(out_dir))) if out_dir else default_out_dir(cfg)
    streams = streams_from_config(cfg)
    shard_bytes = max(1, int(settings["shard_mb"] * 1e6))
    pieces = _fingerprint([p for s in streams for p in plan_pieces(s, shard_bytes)])
    plan = {"cache_key": key, "settings": settings, "pieces": pieces}
    out.mkdir(parents=True, exist_ok=True)
    (out / SHARDS).mkdir(exist_ok=True)
    if (out / PLAN).exists():
        old = json.loads((out / PLAN).read_text())
        if old["cache_key"] != key:
            was = {"split": SHARDED_KEY_RULE, **old.get("settings", {})}  # a plan from before data.split: name_hash
            now = {"split": SHARDED_KEY_RULE, **settings}
            differ = [k for k in sorted(was.keys() | now.keys()) if was.get(k) != now.get(k)]
            detail = ", ".join(f"{k}: {was[k]} -> {now[k]}" if k in ("split", "vocab_size", "val_fraction") and k in was and k in now
                               else k for k in differ)
            raise ConfigError("out", f"{out} holds a pre-tokenization with other settings (key {old['cache_key']}; "
                              f"differs in {detail or 'the key format'})",
                              "choose another output directory or delete it, or pass the settings it was made with")
        if json.loads(json.dumps(pieces)) != old["pieces"]:
            raise ConfigError("data.paths", f"the input files changed since {out} was started",
                              "restore them, or delete the output directory to start over")
    else:
        atomic.write_text(out / PLAN, json.dumps(plan, indent=1))

    # read only when needed (the shuffle rule reads the corpus): to train the BPE or tokenize a piece
    held = functools.cache(lambda: held_out(_split(cfg), streams, pieces, say))
    tok = _ensure_tokenizer(out, streams, pieces, settings, held, say)
    dtype = storage_dtype(tok.vocab_size)
    if not is_pretrained(settings["tokenizer"]) and tok.vocab_size > settings["vocab_size"]:
        raise ConfigError("data.vocab_size", f"tokenizer has {tok.vocab_size} tokens", "use a larger vocab_size")
    markers: list[dict[str, Any] | None] = [_finished(out, i, tok.sha256, dtype.itemsize) for i in range(len(pieces))]
    todo = [i for i, m in enumerate(markers) if m is None]
    if todo and (out / MANIFEST).exists():
        (out / MANIFEST).unlink()  # the directory is incomplete again until this run finishes
    jobs = [{"index": i, "piece": pieces[i], "out": str(out), "tokenizer": str(out / TOKENIZER), "eot_id": tok.eot_id,
             "dtype": dtype.name, "tokenizer_sha256": tok.sha256, "count_size": tok.vocab_size,
             "held_out": held()} for i in todo]
    say(f"[pretokenize] {out}: {len(pieces)} shards, {len(pieces) - len(todo)} already done, {len(todo)} to do"
        f" with {workers if workers else 'in-process'} worker(s)")

    from tqdm.auto import tqdm

    t0 = time.time()
    done_bytes = done_tokens = 0
    cpu_seconds = 0.0
    bar = tqdm(total=len(pieces), initial=len(pieces) - len(todo), unit="shard", disable=not progress, file=sys.stderr,
               mininterval=1.0)

    def record(result: dict[str, Any]) -> None:
        nonlocal done_bytes, done_tokens, cpu_seconds
        if "config_error" in result:
            _raise_worker_error(*result["config_error"])
        markers[result["index"]] = result
        cpu_seconds += result["cpu_seconds"]
        done_bytes += result["train"]["bytes"] + result["val"]["bytes"]
        done_tokens += result["train"]["tokens"] + result["val"]["tokens"]
        dt = max(time.time() - t0, 1e-9)
        bar.set_postfix_str(f"{done_bytes / dt / 1e6:.1f} MB/s, {done_tokens / dt / 1e6:.2f} Mtok/s")
        bar.update(1)

    try:
        if not workers or workers <= 0:
            for job in jobs:
                record(_tokenize_piece(job))
        elif jobs:
            ctx = mp.get_context("spawn")  # fork after tokenizers has used threads can deadlock
            with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker) as pool:
                futures = [pool.submit(_tokenize_piece, job) for job in jobs]
                try:
                    for fut in as_completed(futures):
                        record(fut.result())
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    finally:
        bar.close()
    seconds = time.time() - t0
    run = {"workers": workers or 0, "shards_tokenized": len(todo), "seconds": round(seconds, 3),
           "input_bytes": done_bytes, "tokens": done_tokens,
           "mb_per_second": round(done_bytes / max(seconds, 1e-9) / 1e6, 3),
           "tokens_per_second": round(done_tokens / max(seconds, 1e-9), 1), "total_seconds": round(time.time() - t_start, 3),
           # Per CPU-second of the tokenizing processes: comparable across machines that are busy with other work.
           "cpu_seconds": round(cpu_seconds, 3), "mb_per_cpu_second": round(done_bytes / max(cpu_seconds, 1e-9) / 1e6, 3)}
    if not todo and (out / MANIFEST).exists():
        manifest = json.loads((out / MANIFEST).read_text())
        if manifest.get("cache_key") == key:
            if "val_segments" not in manifest:  # written before the held-out split was stratified
                manifest = restratify(out)
            return {**manifest, "last_run": run}  # nothing to do: the manifest on disk stays as it was
    return _finalize(out, cfg, settings, key, streams, markers, tok, dtype, run)  # type: ignore[arg-type]
