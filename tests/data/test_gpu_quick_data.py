"""gpu_quick's data path, offline: a Hub dataset -> `pretokenize` -> shards -> a trained job.

A local copy of HuggingFaceFW/fineweb-edu is written the way `huggingface-cli download
--include 'sample/10BT/*' README.md` leaves it: the repository's README (its `configs:` header as on
the Hub: `default` first, then `sample-10BT`, and the features) and Parquet files under
sample/10BT/ with FineWeb-Edu's columns. The real `pretokenize` command runs on it with gpu_quick's
data settings, only the dataset location (conf/experiment/gpu_quick.yaml's documented offline
override) and the tokenizer (a local directory in place of SmolLM2's) changed, with the Hub switched
off; a tiny job then trains from the shards it left in the data cache.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixedcode_study.config import compose
from fixedcode_study.data.shards import default_out_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import save_hf_tokenizer, sentence  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
FILES, DOCS_PER_FILE = 3, 10_000  # 30k short documents: gpu_quick's val_fraction 0.0005 holds ~15 out

# FineWeb-Edu's columns and types, as its README declares them.
FEATURES = {"text": "string", "id": "string", "dump": "string", "url": "string", "date": "string",
            "file_path": "string", "language": "string", "language_score": "float64", "token_count": "int64",
            "score": "float64", "int_score": "int64"}
README = """---
license: odc-by
pretty_name: FineWeb-Edu
configs:
  - config_name: default
    data_files:
      - split: train
        path: data/*/*
    features:
{features}
  - config_name: sample-10BT
    data_files:
      - split: train
        path: sample/10BT/*
  - config_name: sample-100BT
    data_files:
      - split: train
        path: sample/100BT/*
---

# FineWeb-Edu (a locally written stand-in in the same layout and schema)
"""


def write_fineweb_edu(root: Path, seed: int = 0) -> list[str]:
    """The local copy (module docstring); returns every document's text, in file order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    features = "\n".join(f"    - name: {k}\n      dtype: {v}" for k, v in FEATURES.items())
    (root / "sample" / "10BT").mkdir(parents=True)
    (root / "README.md").write_text(README.format(features=features), encoding="utf-8")
    texts = []
    types = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64()}
    for f in range(FILES):
        docs = [sentence(rng, rng.randint(4, 16)) for _ in range(DOCS_PER_FILE)]
        scores = [rng.uniform(2.5, 5.0) for _ in docs]
        columns = {
            "text": docs,
            "id": [f"<urn:uuid:{f:02d}-{i:06d}>" for i in range(len(docs))],
            "dump": ["CC-MAIN-2024-10"] * len(docs),
            "url": [f"https://example.org/{f}/{i}" for i in range(len(docs))],
            "date": ["2024-02-21T12:00:00Z"] * len(docs),
            "file_path": [f"s3://commoncrawl/crawl-data/CC-MAIN-2024-10/segments/{f}/warc/{i}.warc.gz"
                          for i in range(len(docs))],
            "language": ["en"] * len(docs),
            "language_score": [rng.uniform(0.9, 1.0) for _ in docs],
            "token_count": [len(t.split()) for t in docs],
            "score": scores,
            "int_score": [int(round(s)) for s in scores],
        }
        schema = pa.schema([(k, types[v]) for k, v in FEATURES.items()])
        pq.write_table(pa.table(columns, schema=schema), root / "sample" / "10BT" / f"{f:03d}_00000.parquet",
                       row_group_size=2_000)
        texts.extend(docs)
    return texts


@pytest.fixture(scope="module")
def local_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_quick_data")
    texts = write_fineweb_edu(root / "fineweb-edu")
    tokenizer = save_hf_tokenizer(texts[:3000], root / "tokenizer", vocab_size=300)  # fits test_micro's V = 512
    data = [f"data.dataset.path={root / 'fineweb-edu'}", "data.dataset.data_files=[sample/10BT/*.parquet]",
            f"data.tokenizer={tokenizer}"]
    return root, texts, data


def offline_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "FIXEDCODE_CACHE": str(cache)}


def test_the_local_copy_changes_only_the_dataset_location_and_tokenizer(local_copy):
    _, _, data = local_copy
    hub = compose(["experiment=gpu_quick"]).data
    local = compose(["experiment=gpu_quick", *data]).data
    assert local.dataset.data_files == ["sample/10BT/*.parquet"] and hub.dataset.data_files is None
    changed = {"path", "data_files"}
    assert {k: v for k, v in local.dataset.items() if k not in changed} == {
        k: v for k, v in hub.dataset.items() if k not in changed}  # name sample-10BT, split, streaming, text field
    assert {k: v for k, v in local.items() if k not in ("dataset", "tokenizer")} == {
        k: v for k, v in hub.items() if k not in ("dataset", "tokenizer")}
    assert hub.dataset.path == "HuggingFaceFW/fineweb-edu" and hub.dataset.name == local.dataset.name == "sample-10BT"


@pytest.mark.slow
def test_pretokenize_then_train_offline(local_copy, tmp_path, monkeypatch):
    from tokenizers import Tokenizer

    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    root, texts, data = local_copy
    cache = tmp_path / "cache"
    # 1. the real command, gpu_quick's data settings, into the data cache (no --out), the Hub off
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study", "pretokenize", "experiment=gpu_quick", *data,
                           "workers=2", "progress=false"],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=offline_env(cache), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    monkeypatch.setenv("FIXEDCODE_CACHE", str(cache))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    out = default_out_dir(compose(["experiment=gpu_quick", *data]).data)
    assert f"data.dir={out}" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["shards"]) == FILES  # one shard per Parquet file of the sample
    assert manifest["documents"]["train"] + manifest["documents"]["val"] == len(texts)
    assert manifest["documents"]["val"] > 0
    tok = Tokenizer.from_file(str(root / "tokenizer" / "tokenizer.json"))
    assert manifest["train_tokens"] + manifest["val_tokens"] == sum(
        len(tok.encode(t, add_special_tokens=False).ids) + 1 for t in texts)  # every document, end-of-text after each
    stamp = (out / "manifest.json").stat().st_mtime_ns

    # 2. a tiny job of the same experiment trains from those shards (model, device and budget shrunk)
    tiny = ["model=test_micro", "trainer=cpu", "logger=csv", "train.tokens=4096", "train.global_batch_tokens=256",
            "train.batch_size=4", "train.val_points=1", "train.log_every=4", "train.val_batch_size=4",
            "train.compile=false"]
    overrides = ["experiment=gpu_quick", *data, *tiny]
    record = run_job(JobSpec.from_cfg(compose(overrides)), tmp_path / "job", overrides).record
    assert record["status"] == "completed" and record["steps"] == 16
    assert record["data"]["cache_key"] == manifest["cache_key"]  # the shards pretokenize wrote
    assert (out / "manifest.json").stat().st_mtime_ns == stamp  # found, not tokenized again
    assert record["data"]["tokenizer_vocab_size"] == 300 <= record["data"]["vocab_size"] == 512
    assert np.isfinite(record["final"]["val_loss"]) and record["final"]["val_tokens"] > 0
    assert record["config"]["data"]["dataset"]["name"] == "sample-10BT"
