"""Data sources (local JSONL/Parquet/text, Hugging Face datasets, mixtures), their pieces, and the
sharded, weighted, deterministic batch sampler."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fixedcode_study.data.batches import GlobalBatchOrder, RandomWindowBatches, TokenDataModule, shard_probabilities
from fixedcode_study.data.corpus import Stream, piece_documents, plan_pieces, streams_from_config, text_file_documents
from fixedcode_study.data.prepare import load_pretokenized, prepare
from fixedcode_study.errors import ConfigError
from fixedcode_study.data.shards import pretokenize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import text_files_cfg, write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("corpus")
    return root, write_corpus(root)


def test_text_files_read_every_format_in_memory(corpus, tmp_path):
    root, docs = corpus
    got = text_file_documents([str(root / "*")])
    assert [d.text for d in got] == [t for f in sorted(docs) for t in docs[f]]
    prepared = prepare({**text_files_cfg(root, tmp_path), "val_fraction": 0.05}, progress=False)
    assert prepared.meta["documents"]["train"] + prepared.meta["documents"]["val"] == len(got)
    with pytest.raises(ConfigError, match=r"^data.text_field: .*'body'"):
        text_file_documents([str(root / "synthetic.parquet")], text_field="body")


@pytest.mark.parametrize("shard_bytes", [1, 97, 1000, 10**9])
def test_pieces_yield_each_document_once_whatever_the_cut(corpus, shard_bytes):
    """JSONL byte ranges and Parquet row-group groups partition the files exactly, with stable names."""
    root, docs = corpus
    stream = streams_from_config({"source": "text_files", "paths": [str(root / "*")]})[0]
    pieces = plan_pieces(stream, shard_bytes)
    got = [d for p in pieces for d in piece_documents(p)]
    assert sorted(d.text for d in got) == sorted(t for f in docs.values() for t in f)
    assert len({d.name for d in got}) == len(got)
    reference = {d.name for p in plan_pieces(stream, 10**9) for d in piece_documents(p)}
    assert {d.name for d in got} == reference  # names (hence the val split) do not depend on the cut
    if shard_bytes == 97:
        assert sum(1 for p in pieces if "start" in p["items"][0]) > 10  # big JSONL files were cut


def test_hf_datasets_streaming_arrow_and_saved_directory(corpus, tmp_path):
    import datasets

    root, docs = corpus
    rows = docs[str(root / "web0.jsonl")] + docs[str(root / "web1.jsonl")]
    files = [str(root / "web0.jsonl"), str(root / "web1.jsonl")]
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"body": rows}).save_to_disk(str(saved))
    for opts in ({"path": "json", "data_files": files, "streaming": True},
                 {"path": "json", "data_files": files, "streaming": False},
                 {"path": str(saved), "text_field": "body"}):
        pieces = plan_pieces(Stream("hf", "hf", 1.0, opts), 2000)
        got = [d for p in pieces for d in piece_documents(p)]
        assert [d.text for d in got] == rows and len({d.name for d in got}) == len(rows)
        assert len(pieces) >= 2
    with pytest.raises(ConfigError, match=r"^data.dataset.textfield: is not a Hugging Face dataset option"):
        plan_pieces(Stream("hf", "hf", 1.0, {"path": "json", "textfield": "x"}, "data.dataset"), 2000)
    with pytest.raises(ConfigError, match=r"^data.dataset.path: cannot load Hugging Face dataset") as err:
        plan_pieces(Stream("hf", "hf", 1.0, {"path": "json", "data_files": [str(tmp_path / "none*.jsonl")]}, "data.dataset"), 2000)
    assert "\n" not in str(err.value)


def test_mixture_pretokenizes_into_the_cache_once_and_samples_by_weight(corpus, tmp_path):
    root, _ = corpus
    cfg = {"name": "mix", "source": "mixture", "vocab_size": 400, "val_fraction": 0.1, "split_seed": 0,
           "shard_mb": 0.006, "cache_dir": str(tmp_path / "cache"), "workers": 0,
           "mixture": {"books": {"kind": "files", "paths": [str(root / "*.txt")], "weight": 0.25},
                       "web": {"kind": "hf", "path": "json", "data_files": [str(root / "web*.jsonl")],
                               "streaming": False, "weight": 0.75}}}
    prepared = prepare(cfg, progress=False)
    stamp = (prepared.root / "manifest.json").stat().st_mtime_ns
    assert prepare(cfg, progress=False).root == prepared.root
    assert (prepared.root / "manifest.json").stat().st_mtime_ns == stamp  # reused, not redone
    # weights are a training-time setting: changing them reuses the same shards
    reweighted = prepare({**cfg, "mixture": {**cfg["mixture"], "books": {**cfg["mixture"]["books"], "weight": 0.5}}},
                         progress=False)
    assert reweighted.root == prepared.root and reweighted.stream_weights == {"books": 0.5, "web": 0.75}

    shards = prepared.train_shards
    assert {s.stream for s in shards} == {"books", "web"} and len(shards) > 3
    dm = TokenDataModule(prepared, seq_len=16, batch_size=8, seed=3)
    dm.setup()
    ds = dm.train_set.slots[0]  # the window sampler behind the (single-process) batch order
    books = sum(p for p, s in zip(ds.probs, shards) if s.stream == "books")
    assert books == pytest.approx(0.25)  # stream mass = its weight, whatever its token count
    web_sizes = {s.path: s.tokens for s in shards if s.stream == "web"}
    web_probs = {s.path: p for p, s in zip(ds.probs, shards) if s.stream == "web"}
    biggest, smallest = max(web_sizes, key=web_sizes.get), min(web_sizes, key=web_sizes.get)
    assert web_probs[biggest] > web_probs[smallest]  # within a stream: by size
    # restarting at step s (as resume sets it from a checkpoint) yields exactly the batches from step s on
    dm.setup()
    dm.train_set.start_micro_step = 7
    assert np.array_equal(next(iter(dm.train_set)), ds.batch(7))


def test_sharded_batches_are_deterministic_and_stay_inside_one_shard(tmp_path):
    paths = []
    for k, n in enumerate([500, 40, 2000, 10]):  # shard k holds only the value k+1
        paths.append(tmp_path / f"{k}.bin")
        np.full(n, k + 1, dtype=np.uint16).tofile(paths[-1])
    make = lambda seed=1, slot=0, **kw: RandomWindowBatches(paths, np.uint16, 32, 64, seed, slot, **kw)  # noqa: E731
    a = make()
    assert a.probs[3] == 0.0  # 10 tokens: no 33-token window
    assert np.allclose(a.probs, np.array([500 - 33, 40 - 33, 2000 - 33, 0]) / (500 + 40 + 2000 - 99))
    for step in range(5):
        batch = a.batch(step)
        assert batch.shape == (64, 33)
        assert all(len(set(row.tolist())) == 1 for row in batch)  # never straddles two shards
        assert np.array_equal(batch, make().batch(step))
    assert not np.array_equal(make(seed=2).batch(0), a.batch(0))
    assert not np.array_equal(make(slot=1).batch(0), a.batch(0))
    it = iter(GlobalBatchOrder(make(), rank=0, world=1, grad_accum=1, start_micro_step=4))
    assert np.array_equal(next(it), a.batch(4)) and np.array_equal(next(it), a.batch(5))
    only_third = make(probs=[0, 0, 1, 0])
    assert (only_third.batch(0) == 3).all()
    with pytest.raises(ConfigError, match=r"^train.seq_len"):
        RandomWindowBatches(paths[3:], np.uint16, 32, 4, 1)
    import pickle

    assert len(a._maps) > 0 and pickle.loads(pickle.dumps(a))._maps == {}  # memmaps never pickled


def test_single_file_draw_is_unchanged(tmp_path):
    path = tmp_path / "train.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    batch = RandomWindowBatches(path, np.uint16, 16, 4, seed=5, slot=2).batch(9)
    starts = np.random.default_rng([5, 9, 2]).integers(0, 1000 - 16 - 1, size=4)
    assert np.array_equal(batch[:, 0].numpy(), starts)  # token value == offset in this file


def test_stream_probabilities_weight_streams_then_sizes():
    p = shard_probabilities([110, 210, 1010], ["a", "a", "b"], {"a": 1.0, "b": 3.0}, seq_len=9)
    assert np.allclose(p, [0.25 * 100 / 300, 0.25 * 200 / 300, 0.75])


def test_pretokenized_weights_override_and_validation(corpus, tmp_path):
    root, _ = corpus
    out = tmp_path / "out"
    pretokenize(text_files_cfg(root, tmp_path), out, workers=0, progress=False)
    prepared = prepare({"source": "pretokenized", "dir": str(out), "vocab_size": 512, "weights": None}, progress=False)
    assert prepared.stream_weights == {"text_files": 1.0} and prepared.meta["vocab_size"] == 512
    with pytest.raises(ConfigError, match=r"^data.weights: unknown stream"):
        load_pretokenized(out, weights={"nope": 1.0})
    with pytest.raises(ConfigError, match=r"^data.dir: .* not a pre-tokenized directory"):
        prepare({"source": "pretokenized", "dir": str(tmp_path), "vocab_size": 512}, progress=False)
    with pytest.raises(ValueError, match="sharded"):
        prepared.train_path  # noqa: B018
    meta = json.loads((out / "manifest.json").read_text())
    for key in ("vocab_size", "tokenizer_vocab_size", "train_tokens", "val_tokens", "val_bytes", "unigram_val_ppl", "cache_key"):
        assert key in meta
