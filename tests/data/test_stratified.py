"""Validation that represents the training mixture: a held-out split stratified by source, window
source labels, per-source losses, and the select/report halves of the validation windows."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from fixedcode_study.data.batches import ValidationWindows
from fixedcode_study.data.layout import read_manifest
from fixedcode_study.data.prepare import PreparedData, load_pretokenized, prepare
from fixedcode_study.data.shards import pretokenize, val_quotas

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import (  # noqa: E402
    ALPHABETS,
    fit_briefly,
    text_files_cfg,
    two_source_mixture_cfg,
    write_corpus,
    write_two_sources,
)

T = 32  # seq_len of the windows below
# The first source in stream order gets the small weight: the old split, cut from the first shards
# in stream order, would have held "alpha" only.
WEIGHTS = {"alpha": 0.25, "omega": 0.75}
TAG = re.compile(r"(ALPHA|OMEGA)\d{4}")


@pytest.fixture(scope="module")
def mixture(tmp_path_factory) -> PreparedData:
    tmp = tmp_path_factory.mktemp("stratified")
    files = write_two_sources(tmp / "corpus")
    return prepare(two_source_mixture_cfg(files, tmp, WEIGHTS, max_val_tokens=6000), progress=False)


def _tokenizer(prepared: PreparedData) -> Tokenizer:
    return Tokenizer.from_file(str(prepared.tokenizer_path))


def test_val_token_shares_match_the_mixture_weights_within_one_window(mixture):
    manifest = mixture.meta
    held_out = {name: s["val_tokens_held_out"] for name, s in manifest["streams"].items()}
    assert held_out["alpha"] > 6000 * 0.25 and held_out["omega"] > 6000 * 0.75  # the cap binds, not a stream
    assert {name: s["val_tokens"] for name, s in manifest["streams"].items()} == {"alpha": 1500, "omega": 4500}
    assert manifest["val_tokens"] == 6000
    assert [s for s, _, _ in mixture.val_segments] == ["alpha", "omega"]
    windows = ValidationWindows(mixture.val_path, mixture.dtype, T, segments=mixture.val_segments)
    scored = {name: n * T for name, n in windows.windows_per_source().items()}
    total = sum(scored.values())
    for name, weight in WEIGHTS.items():
        assert abs(scored[name] - weight * total) <= T + 1, (name, scored)


def test_window_labels_name_the_source_of_every_token(mixture):
    tok = _tokenizer(mixture)
    windows = ValidationWindows(mixture.val_path, mixture.dtype, T, segments=mixture.val_segments)
    assert set(windows.windows_per_source()) == set(ALPHABETS) and min(windows.windows_per_source().values()) > 0
    for i in range(len(windows)):
        window, weight, index, label = windows[i]
        assert int(index) == i and float(weight) == 1.0
        source = windows.sources[int(label)]
        text = tok.decode(window.tolist())
        # never a token of the other source: its words' letters, nor its tag's (a window may cut a tag)
        assert set(re.sub(r"[^a-z]", "", text)) <= set(ALPHABETS[source]), (i, source, text)
        assert set(re.sub(r"[^A-Z]", "", text)) <= set(source.upper()), (i, source, text)


def test_no_validation_window_overlaps_training(mixture):
    tok = _tokenizer(mixture)
    val_text = tok.decode(np.fromfile(mixture.val_path, dtype=mixture.dtype).tolist())
    train_text = "".join(tok.decode(np.fromfile(s.path, dtype=mixture.dtype).tolist()) for s in mixture.train_shards)
    val_docs = {m.group(0) for m in TAG.finditer(val_text)}
    train_docs = {m.group(0) for m in TAG.finditer(train_text)}
    assert {d[:5] for d in val_docs} == {"ALPHA", "OMEGA"} and len(val_docs) >= 10 and len(train_docs) > 500
    assert not val_docs & train_docs  # a document cut into the split, from either stream, is never trained on


def test_quotas_shrink_the_split_rather_than_underweight_a_short_source():
    notes = []
    quotas = val_quotas({"big": 10_000, "small": 100}, {"big": 0.5, "small": 0.5}, cap=4000, say=notes.append)
    assert quotas == {"big": 100, "small": 100} and "'small'" in notes[0]
    assert val_quotas({"only": 1234}, {"only": 3.0}, cap=1000) == {"only": 1000}
    assert val_quotas({"only": 1234}, {"only": 3.0}, cap=None) == {"only": 1234}
    quotas = val_quotas({"a": 50, "b": 0}, {"a": 1.0, "b": 1.0}, cap=None, say=notes.append)
    assert quotas == {"a": 50, "b": 0} and "'b' has no held-out document" in notes[-1]


def test_single_source_split_is_unchanged(tmp_path):
    """One stream: val.bin is still the shards' held-out tokens in piece order cut at the cap, and
    its windows are the split's plain non-overlapping windows."""
    root = tmp_path / "corpus"
    write_corpus(root)
    out = tmp_path / "out"
    manifest = pretokenize(text_files_cfg(root, tmp_path, max_val_tokens=1500), out, workers=0, progress=False)
    assert len(manifest["shards"]) > 3
    old_way = np.concatenate([np.fromfile(out / s["val_path"], dtype=manifest["dtype"]) for s in manifest["shards"]])[:1500]
    n = len(old_way)  # the cap, or all held-out tokens when the tokenizer leaves fewer
    val = np.fromfile(out / "val.bin", dtype=manifest["dtype"])
    assert np.array_equal(val, old_way) and manifest["val_segments"] == [{"stream": "text_files", "start": 0, "end": n}]
    prepared = load_pretokenized(out)
    windows = ValidationWindows(prepared.val_path, prepared.dtype, T, segments=prepared.val_segments)
    assert n > 2 * T and np.array_equal(windows.starts, T * np.arange((n - 1) // T))
    # a manifest from before val_segments existed gives the same ranges
    legacy = PreparedData(out, {k: v for k, v in prepared.meta.items() if k not in ("val_segments", "val_weights")})
    assert legacy.val_segments == prepared.val_segments
    in_memory = prepare(text_files_cfg(root, tmp_path), progress=False)
    assert in_memory.val_segments == [("text_files", 0, in_memory.meta["val_tokens"])]


def _make_legacy(out: Path) -> None:
    """Turn a finished directory into what an older version left: the first shards' held-out
    tokens (alpha's only) cut at the cap, and no ranges in the manifest."""
    manifest = read_manifest(out)
    cap = manifest["settings"]["max_val_tokens"]
    old = np.concatenate([np.fromfile(out / s["val_path"], dtype=manifest["dtype"]) for s in manifest["shards"]])[:cap]
    old.tofile(out / "val.bin")
    legacy = {k: v for k, v in manifest.items() if k not in ("val_segments", "val_weights")}
    (out / "manifest.json").write_text(json.dumps({**legacy, "val_tokens": int(old.size)}))


def test_a_directory_from_before_stratification_is_restratified(tmp_path, monkeypatch):
    import fixedcode_study.data.shards as shards

    files = write_two_sources(tmp_path / "corpus", docs_per_source=150)
    cfg = two_source_mixture_cfg(files, tmp_path, WEIGHTS, max_val_tokens=2000)
    out = tmp_path / "out"
    stratified = pretokenize(cfg, out, workers=0, progress=False)
    _make_legacy(out)
    assert [s for s, _, _ in load_pretokenized(out).val_segments] == ["alpha"]  # labelled right, though one-sided
    again = pretokenize(cfg, out, workers=0, progress=False)  # no shard to redo: only the split is rebuilt
    assert again["last_run"]["shards_tokenized"] == 0
    for key in ("val_segments", "val_tokens", "val_bytes", "unigram_val_ppl", "streams"):
        assert again[key] == stratified[key], key
    alpha, omega = again["streams"]["alpha"]["val_tokens"], again["streams"]["omega"]["val_tokens"]
    assert alpha > 0 and abs(omega - 3 * alpha) <= 3

    # a cache directory is restratified on first use, from its own files: no source is planned
    # again (that would need the network for Hub datasets)
    cached = prepare(cfg, progress=False)
    _make_legacy(cached.root)
    monkeypatch.setattr(shards, "pretokenize", lambda *a, **k: pytest.fail("re-planned the sources"))
    assert prepare(cfg, progress=False).val_segments == cached.val_segments


def _val_rows(rows):
    return [metrics for _, metrics in rows if "val/loss" in metrics]


def test_per_source_and_half_losses_are_logged_and_add_up_to_val_loss(mixture):
    task, dm, rows = fit_briefly(mixture, 4, seq_len=T, val_batch_size=5)
    final = _val_rows(rows)[-1]
    windows = dm.val_set
    per_source = windows.windows_per_source()
    assert set(final) >= {"val/loss", "val/loss_select", "val/loss_report", "val/loss@alpha", "val/loss@omega"}
    # token-weighted means of the parts give the whole (each window scores T tokens)
    n = sum(per_source.values())
    mixed = sum(final[f"val/loss@{s}"] * per_source[s] for s in per_source) / n
    halves = (final["val/loss_select"] * math.ceil(n / 2) + final["val/loss_report"] * (n // 2)) / n
    assert mixed == pytest.approx(final["val/loss"], rel=1e-12)
    assert halves == pytest.approx(final["val/loss"], rel=1e-12)
    assert final["val/loss@alpha"] != final["val/loss@omega"]  # two sources, two different numbers
    summary = {k: float(v) for k, v in task.trainer.callback_metrics.items() if k.startswith("summary/val_loss")}
    assert summary["summary/val_loss@omega"] == final["val/loss@omega"]
    assert summary["summary/val_loss_select"] == final["val/loss_select"]
    assert summary["summary/val_loss_report"] == final["val/loss_report"]


def test_halves_are_fixed_windows_whatever_the_world_size_and_batch_size(mixture):
    one = ValidationWindows(mixture.val_path, mixture.dtype, T, segments=mixture.val_segments)
    ranks = [ValidationWindows(mixture.val_path, mixture.dtype, T, rank=r, world_size=3, segments=mixture.val_segments)
             for r in range(3)]
    items = lambda ds: {(int(ds[i][2]), int(ds[i][3]), tuple(ds[i][0].tolist()))  # noqa: E731
                        for i in range(len(ds)) if float(ds[i][1]) == 1.0}
    assert set().union(*(items(r) for r in ranks)) == items(one)  # same windows, indices and labels
    # and the half losses do not move with the validation batch size (up to float64 summation order)
    a = _val_rows(fit_briefly(mixture, 2, seq_len=T, val_batch_size=3)[2])[-1]
    b = _val_rows(fit_briefly(mixture, 2, seq_len=T, val_batch_size=8)[2])[-1]
    for key in ("val/loss_select", "val/loss_report", "val/loss@alpha", "val/loss@omega"):
        assert a[key] == pytest.approx(b[key], rel=1e-12)
    assert a["val/loss_select"] != a["val/loss_report"]


def test_single_source_logs_halves_but_no_per_source_loss(tmp_path):
    root = tmp_path / "corpus"
    write_corpus(root)
    prepared = prepare(text_files_cfg(root, tmp_path), progress=False)
    final = _val_rows(fit_briefly(prepared, 2, seq_len=T)[2])[-1]
    assert {"val/loss_select", "val/loss_report"} <= set(final)
    assert not [k for k in final if "@" in k]
