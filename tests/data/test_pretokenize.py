"""Sharded pre-tokenization: counts match a direct tokenization, restarts skip finished shards and
redo broken ones, HF tokenizers from a local directory, the offline Hub error, and training from a
pre-tokenized directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from fixedcode_study.data.prepare import load_pretokenized
from fixedcode_study.errors import ConfigError
from fixedcode_study.data.shards import pretokenize
from fixedcode_study.data.tokenizer import load_pretrained

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import save_hf_tokenizer, text_files_cfg, write_corpus  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("corpus")
    return root, write_corpus(root)


@pytest.fixture(scope="module")
def two_workers(corpus, tmp_path_factory) -> tuple[Path, dict]:
    """The corpus pre-tokenized once with 2 spawned worker processes (shared by several tests)."""
    root, _ = corpus
    tmp = tmp_path_factory.mktemp("pretok")
    out = tmp / "out"
    return out, pretokenize(text_files_cfg(root, tmp), out, workers=2, progress=False)


def _all_tokens(out: Path, manifest: dict) -> np.ndarray:
    dtype = np.dtype(manifest["dtype"])
    parts = [np.fromfile(out / s[key], dtype=dtype) for s in manifest["shards"] for key in ("path", "val_path")]
    return np.concatenate(parts)


def test_manifest_counts_match_a_direct_tokenization(corpus, two_workers):
    _, docs = corpus
    out, manifest = two_workers
    texts = [t for file_docs in docs.values() for t in file_docs]
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    eot = manifest["eot_id"]
    direct = [np.array(tok.encode(t, add_special_tokens=False).ids + [eot]) for t in texts]

    # every document exactly once, in train or val, followed by end-of-text
    assert manifest["documents"]["train"] + manifest["documents"]["val"] == len(texts)
    assert manifest["documents"]["val"] > 0 and manifest["documents"]["train"] > 0
    assert manifest["train_tokens"] + manifest["val_tokens"] == sum(d.size for d in direct)
    assert manifest["train_bytes"] + manifest["val_bytes"] == sum(len(t.encode("utf-8")) for t in texts)
    # the same multiset of token IDs as tokenizing each document directly
    shards = _all_tokens(out, manifest)
    vocab = manifest["tokenizer_vocab_size"]
    assert np.array_equal(np.bincount(shards, minlength=vocab), np.bincount(np.concatenate(direct), minlength=vocab))
    # the manifest's per-shard counts are the files' sizes; val.bin is the val shards in order
    itemsize = np.dtype(manifest["dtype"]).itemsize
    for s in manifest["shards"]:
        assert (out / s["path"]).stat().st_size == s["tokens"] * itemsize
    assert sum(s["tokens"] for s in manifest["shards"]) == manifest["train_tokens"]
    val = np.fromfile(out / "val.bin", dtype=manifest["dtype"])
    assert np.array_equal(val, np.concatenate([np.fromfile(out / s["val_path"], dtype=manifest["dtype"]) for s in manifest["shards"]]))
    # text, JSONL byte ranges, gzipped JSONL and Parquet row groups each made several shards
    assert len(manifest["shards"]) >= 6
    assert manifest["tokenizer"]["sha256"] == load_pretrained(str(out / "tokenizer.json")).sha256
    assert 1.0 < manifest["unigram_val_ppl"] < vocab
    assert manifest["last_run"]["workers"] == 2 and manifest["last_run"]["shards_tokenized"] == len(manifest["shards"])


def test_worker_count_does_not_change_the_shards(corpus, two_workers, tmp_path):
    root, _ = corpus
    out2, manifest2 = two_workers
    out0 = tmp_path / "inproc"
    manifest0 = pretokenize(text_files_cfg(root, tmp_path), out0, workers=0, progress=False)
    assert manifest0["cache_key"] == manifest2["cache_key"]
    assert (out0 / "tokenizer.json").read_bytes() == (out2 / "tokenizer.json").read_bytes()
    for a, b in zip(manifest0["shards"], manifest2["shards"]):
        assert (out0 / a["path"]).read_bytes() == (out2 / b["path"]).read_bytes()
    assert (out0 / "val.bin").read_bytes() == (out2 / "val.bin").read_bytes()


def test_rerun_skips_finished_shards_and_redoes_a_broken_one(corpus, tmp_path):
    root, _ = corpus
    cfg = text_files_cfg(root, tmp_path)
    out = tmp_path / "out"
    first = pretokenize(cfg, out, workers=0, progress=False)
    n = len(first["shards"])
    files = sorted((out / "shards").glob("*.bin"))
    stamps = {f: f.stat().st_mtime_ns for f in files}
    good = {f: f.read_bytes() for f in files}

    again = pretokenize(cfg, out, workers=0, progress=False)
    assert again["last_run"]["shards_tokenized"] == 0
    assert {f: f.stat().st_mtime_ns for f in files} == stamps

    # shard 2 was killed mid-write: no done marker, a truncated train file
    broken = out / "shards" / "00002.train.bin"
    (out / "shards" / "00002.json").unlink()
    broken.write_bytes(good[broken][:10])
    # shard 3's marker survived but its file did not
    (out / "shards" / "00003.val.bin").unlink()
    redo = pretokenize(cfg, out, workers=0, progress=False)
    assert redo["last_run"]["shards_tokenized"] == 2 and len(redo["shards"]) == n
    assert all(f.read_bytes() == good[f] for f in files)
    untouched = [f for f in files if not f.name.startswith(("00002.", "00003."))]
    assert all(f.stat().st_mtime_ns == stamps[f] for f in untouched)
    assert redo["train_tokens"] == first["train_tokens"] and redo["val_tokens"] == first["val_tokens"]


def test_incomplete_or_mismatched_output_directories_are_refused(corpus, tmp_path):
    root, _ = corpus
    out = tmp_path / "out"
    cfg = text_files_cfg(root, tmp_path)
    pretokenize(cfg, out, workers=0, progress=False)
    with pytest.raises(ConfigError, match=r"^out: .*other settings"):
        pretokenize({**cfg, "vocab_size": 420}, out, workers=0, progress=False)
    (out / "manifest.json").unlink()  # as if the run had been killed before finishing
    with pytest.raises(ConfigError, match=r"^data.dir: .*incomplete"):
        load_pretokenized(out)


def test_bad_text_field_in_a_worker_is_a_one_line_config_error(corpus, tmp_path):
    root, _ = corpus
    cfg = text_files_cfg(root, tmp_path, paths=[str(root / "*.jsonl")], text_field="body", tokenizer=None)
    cfg["tokenizer"] = str(tmp_path / "tok.json")
    from fixedcode_study.data.tokenizer import train_bpe

    train_bpe(["some text"] * 10, 300).save(cfg["tokenizer"])
    with pytest.raises(ConfigError, match=r"^data.text_field: .*'body'") as err:
        pretokenize(cfg, tmp_path / "out", workers=2, progress=False)
    assert "\n" not in str(err.value)


def test_hf_tokenizer_from_a_local_directory(corpus, tmp_path):
    root, docs = corpus
    texts = [t for file_docs in docs.values() for t in file_docs]
    tok_dir = save_hf_tokenizer(texts, tmp_path / "hf_tokenizer", vocab_size=300)
    cfg = text_files_cfg(root, tmp_path, tokenizer=str(tok_dir))
    out = tmp_path / "out"
    manifest = pretokenize(cfg, out, workers=0, progress=False)
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    assert manifest["eot_id"] == tok.token_to_id("</s>") == 1  # the eos the directory declares
    assert manifest["tokenizer"]["sha256"] == load_pretrained(str(tok_dir)).sha256
    direct = sum(len(tok.encode(t, add_special_tokens=False).ids) + 1 for t in texts)
    assert manifest["train_tokens"] + manifest["val_tokens"] == direct
    # bytes per token (Sequence[Digits, ByteLevel] pre-tokenizer): val bytes counted exactly
    assert manifest["train_bytes"] + manifest["val_bytes"] == sum(len(t.encode("utf-8")) for t in texts)
    token_bytes = np.load(out / "token_bytes.npy")
    assert token_bytes[0] == token_bytes[1] == 0 and token_bytes.size == tok.get_vocab_size()


def test_hub_tokenizer_offline_is_a_one_line_config_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        load_pretrained("HuggingFaceTB/SmolLM2-1.7B")
    msg = str(err.value)
    assert msg.startswith("data.tokenizer: 'HuggingFaceTB/SmolLM2-1.7B'") and "offline" in msg and "\n" not in msg
    assert "huggingface-cli download HuggingFaceTB/SmolLM2-1.7B" in msg


def test_paper_preset_offline_fails_with_one_line_from_the_cli(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study", "pretokenize", "data=paper_mix", "model=paper_1p7b",
                           "out=" + str(tmp_path / "out"), "progress=false"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert errors[0].startswith("error: data.mixture.fineweb_edu.path: cannot load Hugging Face dataset 'HuggingFaceFW/fineweb-edu'")


def test_cli_pretokenizes_and_training_runs_from_the_directory(corpus, tmp_path):
    from hydra import compose, initialize_config_dir

    from fixedcode_study.config import CONFIG_DIR
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    root, _ = corpus
    out = tmp_path / "pretok"
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study", "pretokenize", "data=text_files",
                           f"data.paths=[{root}/*]", "data.vocab_size=400", "data.val_fraction=0.3", "data.shard_mb=0.01",
                           "data.max_val_tokens=1200", "workers=2", f"out={out}", "progress=false"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tokens/s" in proc.stdout and f"data.dir={out}" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["val_tokens"] == 1200

    overrides = ["model=test_micro", "logger=csv", "data=pretokenized", f"data.dir={out}", "train.tokens=2048",
                 "train.batch_size=4", "train.seq_len=32", "train.val_points=1", "train.log_every=4",
                 "train.val_batch_size=16"]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    record = run_job(JobSpec.from_cfg(cfg), tmp_path / "job", overrides).record
    assert record["status"] == "completed" and record["steps"] == 16
    assert record["data"]["cache_key"] == manifest["cache_key"]
    assert record["data"]["tokenizer_vocab_size"] == manifest["tokenizer_vocab_size"] <= record["data"]["vocab_size"] == 512
    assert record["data"]["unigram_val_ppl"] == manifest["unigram_val_ppl"]
    # the rule that applied: text_files' own (conf/data), kept by the directory and recorded by the job
    assert record["data"]["split"] == manifest["split"] == "shuffle" and "split" not in record["config"]["data"]
    assert np.isfinite(record["final"]["val_loss"]) and record["final"]["val_tokens"] == (1200 - 1) // 32 * 32
    ckpt = tmp_path / "job" / record["checkpoint"] / "tokenizer.json"
    assert ckpt.read_bytes() == (out / "tokenizer.json").read_bytes()

    # a model whose vocabulary is smaller than the directory's tokenizer is refused up front
    with pytest.raises(ConfigError, match=r"^model.vocab_size: 300 is smaller"):
        load_pretokenized(out, vocab_size=300)
