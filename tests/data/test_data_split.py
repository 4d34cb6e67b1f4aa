"""data.split: one held-out rule for both preparation paths, a setting of its own that keeps every
earlier cache key and job fingerprint, and one unigram reference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from fixedcode_study.config import compose
from fixedcode_study.data import layout
from fixedcode_study.data.prepare import plan_in_memory, prepare
from fixedcode_study.data.shards import default_out_dir, pretokenize, settings_for
from fixedcode_study.data.split import RULES, Split, unigram_val_ppl
from fixedcode_study.errors import ConfigError
from fixedcode_study.spec.job import JobSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import text_files_cfg, write_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GUTENBERG = REPO.parent / "shared" / "data" / "corpus" / "gutenberg"
REPORTS = REPO / "docs" / "reports"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Text, JSONL (cut into byte ranges when sharded), gzipped JSONL and Parquet files."""
    root = tmp_path_factory.mktemp("split") / "corpus"
    write_corpus(root)
    return root


def held_out_texts(root: Path, val_file: Path, dtype: str, eot: int) -> list[str]:
    """The held-out documents a preparation wrote, decoded from its val.bin with its own tokenizer."""
    tok = Tokenizer.from_file(str(root / layout.TOKENIZER))
    tokens = np.fromfile(val_file, dtype=dtype)
    ends = np.flatnonzero(tokens == eot)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [tok.decode(tokens[a:b].tolist(), skip_special_tokens=False) for a, b in zip(starts, ends)]


@pytest.mark.parametrize("rule", RULES)
def test_both_paths_hold_out_the_same_documents(rule, corpus, tmp_path, monkeypatch):
    """One corpus, one rule: the in-memory cache and the sharded pre-tokenization (2 worker
    processes, JSONL files cut into byte ranges) hold out the same documents, and say which rule."""
    monkeypatch.chdir(corpus.parent)  # a relative glob: documents are named as it matches them
    cfg = text_files_cfg(corpus, tmp_path, paths=[f"{corpus.name}/*"], split=rule, val_fraction=0.1)
    memory = prepare(cfg, progress=False)
    out = tmp_path / "sharded"
    manifest = pretokenize(cfg, out, workers=2, progress=False)
    assert len(manifest["shards"]) >= 6  # several pieces, so the split was decided piece by piece

    in_memory = held_out_texts(memory.root, memory.val_path, memory.meta["dtype"], memory.meta["eot_id"])
    sharded = held_out_texts(out, out / layout.VAL_TOKENS, manifest["dtype"], manifest["eot_id"])
    recorded = [json.loads(line)["text"] for line in (memory.root / layout.VAL_DOCS).read_text().splitlines()]
    assert in_memory == recorded  # the decoded tokens are the documents themselves
    assert 20 < len(in_memory) < 200 and sorted(sharded) == sorted(in_memory)
    assert manifest["documents"] == memory.meta["documents"]
    assert memory.meta["split"] == manifest["split"] == rule
    assert prepare({"source": "pretokenized", "dir": str(out), "vocab_size": 512}, progress=False).meta["split"] == rule


def test_the_rules_choose_differently_and_shuffle_meets_its_share():
    docs = [(f"doc{i}", 100 + (i * 37) % 400) for i in range(500)]  # (name, characters)
    total = sum(size for _, size in docs)
    shuffled = Split("shuffle", 0.1, 0).held_out(docs)
    hashed = Split("name_hash", 0.1, 0).held_out(docs)
    held = sum(size for name, size in docs if name in shuffled)
    assert 0.1 * total <= held < 0.1 * total + 500  # whole documents, stopping once the share is met
    assert shuffled != hashed and 25 < len(hashed) < 75
    assert Split("shuffle", 0.1, 1).held_out(docs) != shuffled  # the seed matters
    hash_rule, shuffle_rule = Split("name_hash", 0.1, 0).membership(), Split("shuffle", 0.1, 0).membership(shuffled)
    assert all((name in hash_rule) == (name in hashed) and (name in shuffle_rule) == (name in shuffled) for name, _ in docs)


def test_a_bad_rule_is_one_line_naming_the_field_and_the_choices(corpus, tmp_path, capsys):
    cfg = text_files_cfg(corpus, tmp_path, split="random")
    for attempt in (lambda: prepare(cfg, progress=False), lambda: pretokenize(cfg, tmp_path / "out", progress=False),
                    lambda: JobSpec.from_cfg(compose(["data.split=random"]))):
        with pytest.raises(ConfigError) as err:
            attempt()
        assert str(err.value).startswith("data.split: ") and "shuffle, name_hash" in str(err.value)
    from fixedcode_study.cli.pretokenize import main

    assert main(["data.split=random", "out=" + str(tmp_path / "cli"), "progress=false"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: data.split: ") and "shuffle, name_hash" in line
    assert not (tmp_path / "cli").exists()  # refused before anything was written


def test_a_pretokenized_directory_keeps_the_split_it_was_written_with(corpus, tmp_path):
    out = tmp_path / "out"
    pretokenize(text_files_cfg(corpus, tmp_path, split="name_hash"), out, progress=False)
    with pytest.raises(ConfigError, match=r"^data.split: .* was pre-tokenized with split 'name_hash', not 'shuffle'"):
        prepare({"source": "pretokenized", "dir": str(out), "vocab_size": 512, "split": "shuffle"}, progress=False)
    # the same directory, asked again under the other rule, names the setting that differs
    with pytest.raises(ConfigError, match=r"^out: .*differs in split: name_hash -> shuffle"):
        pretokenize(text_files_cfg(corpus, tmp_path, split="shuffle"), out, progress=False)


def test_every_data_config_records_its_rule_and_keeps_its_fingerprint():
    """data.split is in the composed config (results.json's `config`), and in the fingerprint only
    where it is not the source's former rule: every earlier job keeps its settings hash."""
    expected = {"shakespeare": "shuffle", "text_files": "shuffle", "gutenberg": "shuffle", "hf": "name_hash",
                "paper_mix": "name_hash"}
    extra = {"text_files": ["data.paths=[x/*.txt]"], "hf": ["data.dataset.path=json"], "paper_mix": ["model=paper_1p7b"]}
    for name, rule in expected.items():
        base = [f"data={name}", *extra.get(name, [])]
        spec = JobSpec.from_cfg(compose(base))
        assert spec.composed["data"]["split"] == rule and spec.data.settings["split"] == rule, name
        assert "data.split" not in spec.fingerprint["settings"], name
        other = JobSpec.from_cfg(compose([*base, f"data.split={'name_hash' if rule == 'shuffle' else 'shuffle'}"]))
        assert other.fingerprint["settings"]["data.split"] != rule, name
        assert other.fingerprint["settings_sha"] != spec.fingerprint["settings_sha"], name
    assert "split" not in compose(["data=pretokenized", "data.dir=/x"]).data  # the directory's own


@pytest.mark.skipif(not REPORTS.is_dir(), reason="no committed reports in this checkout")
def test_committed_jobs_recompose_to_their_recorded_data_settings(monkeypatch):
    monkeypatch.delenv("FIXEDCODE_GUTENBERG", raising=False)
    records = sorted(REPORTS.glob("*/runs/*/results.json"))[:3]
    if not records:
        pytest.skip("no committed job records")
    for path in records:
        record = json.loads(path.read_text())
        settings = JobSpec.from_cfg(compose(list(record["overrides"]))).fingerprint["settings"]
        recorded = record["fingerprint"]["settings"]
        data = lambda s: {k: v for k, v in s.items() if k.startswith("data.")}  # noqa: E731
        assert data(settings) == data(recorded), path.parent.name


def test_cache_keys_leave_out_the_rule_each_layout_always_had(corpus, tmp_path):
    """A config from before data.split (none given) keys as its former rule did; the other rule is another key."""
    cfg = text_files_cfg(corpus, tmp_path)
    cfg.pop("split", None)
    in_memory = {rule: plan_in_memory({**cfg, "split": rule}).key for rule in RULES}
    assert plan_in_memory(cfg).key == in_memory["shuffle"] != in_memory["name_hash"]
    sharded = {rule: layout.cache_key(settings_for({**cfg, "split": rule, "paths": [str(corpus / "*")]})) for rule in RULES}
    assert "split" not in settings_for({**cfg, "split": "name_hash"}) and sharded["name_hash"] != sharded["shuffle"]
    assert default_out_dir({**cfg, "split": "name_hash"}).name.endswith(sharded["name_hash"])


@pytest.mark.skipif(not GUTENBERG.is_dir(), reason="../shared/data/corpus/gutenberg is not on this machine")
def test_gutenberg_keeps_the_cache_key_its_committed_jobs_record(monkeypatch):
    """The key hashes the documents (names and text) and the settings: the reports' key means the
    corpus is read, named and split exactly as when those jobs trained."""
    monkeypatch.delenv("FIXEDCODE_GUTENBERG", raising=False)
    monkeypatch.chdir(REPO)  # the preset's path is relative: ../shared/data/corpus/gutenberg
    plan = plan_in_memory(compose(["data=gutenberg", "model=ladder_d32"]).data)
    assert plan.key == "4b881d0c23879450aaf1"  # docs/reports/compute_ladder: results.json data.cache_key
    held = plan.split.held_out((d.name, len(d.text)) for d in plan.docs)
    assert held == {"../shared/data/corpus/gutenberg/pg44414.txt"}  # its val_docs.jsonl: 1 of 107 books


def test_one_unigram_reference_for_both_paths(corpus, tmp_path):
    """Both paths record split.unigram_val_ppl of their own files: add-one over the counted vocabulary."""
    cfg = text_files_cfg(corpus, tmp_path, split="name_hash")
    memory = prepare(cfg, progress=False)
    train, val = memory.tokens("train"), memory.tokens("val")
    counts = np.bincount(train, minlength=memory.meta["vocab_size"])
    by_hand = np.exp(-np.mean(np.log((counts[val] + 1.0) / (counts.sum() + counts.size))))
    assert memory.meta["unigram_val_ppl"] == unigram_val_ppl(counts, val) == pytest.approx(by_hand, rel=1e-12)
    out = tmp_path / "out"
    manifest = pretokenize(cfg, out, progress=False)
    shard_counts = sum(np.load(out / s["path"].replace(".train.bin", ".counts.npy")) for s in manifest["shards"])
    assert manifest["unigram_val_ppl"] == unigram_val_ppl(shard_counts, np.fromfile(out / "val.bin", dtype=manifest["dtype"]))
    assert unigram_val_ppl(counts, val[:0]) is None
