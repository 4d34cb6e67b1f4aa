"""The final validation loss broken down where the gap could live (issue 24, point 1).

A real tiny job's results.json `val_breakdown` adds up to its whole validation (tokens and bytes
exactly, nats to float64 rounding, and its total is the one val/loss and val/bpb were computed from),
and each bucket holds the tokens an independent count from the data files puts there. Bucket
assignments are checked on hand-worked ids. The analysis compares arms per bucket with the
headline's paired test and Holm, and each comparison's shares of the gap add up to 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.analysis import write_job
from helpers.eval import trained_checkpoint
from scipy import stats as sps

from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.report import write_report
from fixedcode_study.analysis.stats.comparisons import Plan
from fixedcode_study.analysis.stats.breakdown import compare_buckets, profiles
from fixedcode_study.analysis.tables.breakdown import breakdown_tables
from fixedcode_study.data.prepare import PreparedData
from fixedcode_study.inputs import build_input
from fixedcode_study.training.breakdown import bit_length, build_breakdown, log2_edges, popcount


@pytest.fixture(scope="module")
def gf2_job() -> tuple[dict, Path, Path]:
    """(results.json, prepared data root, job directory) of the shared tiny gf2 job (helpers.eval)."""
    checkpoint, data_root = trained_checkpoint("gf2")
    job_dir = checkpoint.parents[1]
    return json.loads((job_dir / "results.json").read_text()), data_root, job_dir


# -- the record: buckets add up to the whole --------------------------------------------------
def test_every_breakdown_adds_up_to_the_whole_validation(gf2_job):
    results, data_root, _ = gf2_job
    final, block = results["final"], results["val_breakdown"]
    total = block["total"]
    assert block["step"] == results["steps"]  # the final validation's, once
    # The whole is the one val/loss and val/bpb were computed from (bitwise: same float64 operations).
    assert total["tokens"] == final["val_tokens"]
    assert total["nats"] / total["tokens"] == final["val_loss"]
    assert total["nats"] / math.log(2) / total["bytes"] == final["val_bpb"]
    # ... and the bytes are those of the validation targets, counted here from the data files.
    val = np.fromfile(data_root / "val.bin", dtype=np.uint16).astype(np.int64)
    token_bytes = np.load(data_root / "token_bytes.npy")
    seq_len = results["config"]["train"]["seq_len"]
    windows = (val.size - 1) // seq_len
    targets = val[1 : windows * seq_len + 1]
    assert total["tokens"] == targets.size and total["bytes"] == int(token_bytes[targets].sum())
    assert set(block["breakdowns"]) == {"target_frequency", "input_id_weight", "input_code_weight", "position"}
    for name, b in block["breakdowns"].items():
        assert sum(b["tokens"]) == total["tokens"], name      # exact: integer-valued sums
        assert sum(b["bytes"]) == total["bytes"], name
        assert math.isclose(sum(b["nats"]), total["nats"], rel_tol=1e-12), name  # float64 rounding
        assert len(b["labels"]) == len(b["lower"]) == len(b["upper"]) == len(b["nats"]), name
    assert block["train_counts"]["source"] == "all tokens"
    assert block["train_counts"]["counted_tokens"] == results["data"]["train_tokens"]


def test_each_bucket_holds_the_tokens_an_independent_count_puts_there(gf2_job):
    results, data_root, job_dir = gf2_job
    block = results["val_breakdown"]["breakdowns"]
    seq_len = results["config"]["train"]["seq_len"]
    val = np.fromfile(data_root / "val.bin", dtype=np.uint16).astype(np.int64)
    windows = (val.size - 1) // seq_len
    inputs = np.stack([val[k * seq_len : (k + 1) * seq_len] for k in range(windows)])
    targets = np.stack([val[k * seq_len + 1 : (k + 1) * seq_len + 1] for k in range(windows)])
    counts = np.bincount(np.fromfile(data_root / "train.bin", dtype=np.uint16), minlength=results["data"]["vocab_size"])

    def log2(v):  # int.bit_length, one value at a time
        return np.array([int(x).bit_length() for x in np.ravel(v)])

    def weight(v):
        return np.array([int(x).bit_count() for x in np.ravel(v)])

    # the arm's own code, from the matrix the job saved beside its record: y = A c mod 2
    rows = json.loads((job_dir / "gf2_matrix.json").read_text())["rows"]
    a = np.array([[int(ch) for ch in row] for row in rows])
    bits = (inputs.ravel()[:, None] >> np.arange(a.shape[1])) & 1
    own = ((bits @ a.T) % 2).sum(axis=1)
    expected = {"target_frequency": log2(counts[targets]), "input_id_weight": weight(inputs), "input_code_weight": own,
                "position": log2(np.broadcast_to(np.arange(seq_len), inputs.shape))}
    for name, buckets in expected.items():
        tokens = np.bincount(buckets, minlength=len(block[name]["tokens"]))
        assert tokens.tolist() == block[name]["tokens"], name


# -- bucket assignment, by hand ---------------------------------------------------------------
def test_bucket_assignment_of_hand_checked_ids():
    assert popcount(np.array([0, 1, 2, 3, 7, 255, 256, 4095, 0b1010_0000_0001])).tolist() == [0, 1, 1, 2, 3, 8, 1, 12, 3]
    assert bit_length(np.array([0, 1, 2, 3, 4, 7, 8, 1000, 2**40])).tolist() == [0, 1, 2, 2, 3, 3, 4, 10, 41]
    assert log2_edges(5) == ([0, 1, 2, 4, 8], [0, 1, 3, 7, 15], ["0", "1", "2-3", "4-7", "8-15"])
    # token 5 never occurs in training: frequency bucket 0, labelled "0"; token 2 occurs 6 times: "4-7"
    counts = np.array([100, 1, 6, 3, 2, 0, 9, 0])
    gf2 = build_input({"type": "gf2", "code_width": 16}, vocab_size=8, d_model=16)
    breakdown = build_breakdown(counts, {"counted_tokens": int(counts.sum())}, 8, seq_len=10, interface=gf2)
    by_name = {b.name: b for b in breakdown.breakdowns}
    freq = by_name["target_frequency"]
    assert freq.table.tolist() == [7, 1, 3, 2, 2, 0, 4, 0] and freq.n == 8
    assert freq.edges()["labels"][freq.table[5]] == "0" and freq.edges()["labels"][freq.table[2]] == "4-7"
    assert by_name["input_id_weight"].table.tolist() == [0, 1, 1, 2, 1, 2, 2, 3] and by_name["input_id_weight"].n == 4
    assert by_name["position"].table.tolist() == [0, 1, 2, 2, 3, 3, 3, 3, 4, 4]
    # gf2: id 1 is the unit vector e_0, so its code is column 0 of A; 16 + 1 weight buckets
    own = by_name["input_code_weight"]
    assert own.n == 17 and own.table[0] == 0 and own.table[1] == int(gf2.matrix_np[:, 0].sum()) >= 4
    # a learned table has no code of its own: only the binary16 weight of its ids
    learned = build_input({"type": "learned"}, vocab_size=8, d_model=16)
    names = [b.name for b in build_breakdown(counts, {}, 8, 10, learned).breakdowns]
    assert names == ["target_frequency", "input_id_weight", "position"]


def test_train_token_counts_of_shards_use_recorded_counts_or_a_bounded_prefix(tmp_path):
    tokens = np.array([1, 2, 2, 3, 3, 3, 0, 5], dtype=np.uint16)
    (tmp_path / "shards").mkdir()
    tokens.tofile(tmp_path / "shards" / "00000.train.bin")
    meta = {"vocab_size": 8, "dtype": "uint16",
            "shards": [{"index": 0, "stream": "s", "path": "shards/00000.train.bin", "tokens": int(tokens.size)}]}
    counts, how = PreparedData(tmp_path, meta).train_token_counts(limit=5)
    assert counts.tolist() == np.bincount(tokens[:5], minlength=8).tolist()
    assert how == {"counted_tokens": 5, "train_tokens": 8, "source": "shard prefix"}
    np.save(tmp_path / "shards" / "00000.counts.npy", np.bincount(tokens, minlength=6))  # a smaller tokenizer vocab
    counts, how = PreparedData(tmp_path, meta).train_token_counts(limit=5)
    assert counts.tolist() == np.bincount(tokens, minlength=8).tolist()
    assert how == {"counted_tokens": 8, "train_tokens": 8, "source": "shard counts"}


# -- the analysis: per-bucket comparisons and shares of the gap ---------------------------------
TOKENS = [10, 30, 60, 0]  # the last bucket holds no validation token
NATS = {("learned", 1): [40.0, 90.0, 120.0, 0.0], ("learned", 2): [41.0, 93.0, 118.0, 0.0],
        ("binary16", 1): [45.0, 96.0, 123.0, 0.0], ("binary16", 2): [47.0, 97.0, 122.5, 0.0]}


def _block(nats: list[float]) -> dict:
    lower, upper, labels = log2_edges(len(TOKENS))
    return {"step": 10, "total": {"nats": sum(nats), "tokens": sum(TOKENS), "bytes": 2 * sum(TOKENS)},
            "train_counts": {"counted_tokens": 1000, "train_tokens": 1000, "source": "all tokens"},
            "breakdowns": {"position": {"of": "position", "kind": "log2", "definition": "position",
                                        "lower": lower, "upper": upper, "labels": labels, "nats": nats,
                                        "tokens": TOKENS, "bytes": [2 * t for t in TOKENS]}}}


def _synthetic_study(root: Path):
    sweep = root / "multirun" / "main"
    for (name, seed), nats in NATS.items():
        loss = sum(nats) / sum(TOKENS)
        write_job(sweep, name, seed, val_ppl=math.exp(loss), val_bpb=loss / math.log(2) / 2, crn=True, curves=False,
                  results_extra={"val_breakdown": _block(nats)})
    for seed in (1, 2):  # an older record: no breakdown
        write_job(sweep, "gf2", seed, val_ppl=200.0, val_bpb=2.0, crn=True, curves=False)
    return load_run_dirs([sweep])


def test_breakdown_table_compares_buckets_pairwise_and_shares_add_up_to_one(tmp_path):
    study = _synthetic_study(tmp_path)
    rows, notes = compare_buckets(study, Plan("learned"), min_tokens=0)  # every bucket big enough to test
    tables = breakdown_tables(study, rows, profiles(study), 0.02, 0)
    assert list(tables) == ["loss_breakdown_position"]
    assert any("2 included job(s) record no loss breakdown" in n for n in notes)  # skipped, not an error
    assert set(rows["comparison"]) == {"binary16 − learned"}  # gf2 has nothing to compare
    assert rows["label"].tolist() == ["0", "1", "2-3"]  # the empty bucket has no mean loss
    a = np.array([[n / t for n, t in zip(NATS["binary16", s][:3], TOKENS[:3])] for s in (1, 2)])
    b = np.array([[n / t for n, t in zip(NATS["learned", s][:3], TOKENS[:3])] for s in (1, 2)])
    assert np.allclose(rows["delta"], (a - b).mean(axis=0), rtol=1e-12)
    p = np.array([sps.ttest_rel(a[:, i], b[:, i]).pvalue for i in range(3)])
    order = np.argsort(p)  # Benjamini-Hochberg by hand: p_(k) m / k, made monotone from the top
    bh = np.minimum(1.0, np.minimum.accumulate((p[order] * 3 / np.arange(1, 4))[::-1])[::-1])
    assert np.allclose(rows["q_value"].to_numpy()[order], bh, rtol=1e-12)
    assert (rows["test"] == "paired").all() and (rows["n"] == "2 pairs").all() and rows["tested"].all()
    # the buckets add up to the true gap: Σ Δ_b tokens_b / T is the gap in total val loss of the runs
    whole = np.mean([(sum(NATS["binary16", s]) - sum(NATS["learned", s])) / sum(TOKENS) for s in (1, 2)])
    assert np.allclose(rows["whole_gap"], whole, rtol=1e-12) and np.allclose(rows["total_gap"], whole, rtol=1e-12)
    assert math.isclose(rows["gap_share"].sum(), 1.0, rel_tol=1e-12)
    table = tables["loss_breakdown_position"]
    assert len(table.rows) == 3 and table.columns[-1] == "share of gap"
    # at the default minimum (100 tokens) these 10-60-token buckets are shown with their Δ and not tested
    rows, _ = compare_buckets(study, Plan("learned"))
    assert not rows["tested"].any() and rows["p_value"].isna().all() and rows["q_value"].isna().all()
    assert np.allclose(rows["delta"], (a - b).mean(axis=0), rtol=1e-12)


def test_report_has_the_breakdown_section_and_figure(tmp_path):
    study = _synthetic_study(tmp_path)
    out = write_report(study, tmp_path / "report")
    text = out.report.read_text()
    assert "## Where the gap lives (loss breakdown)" in text and "position in the context window" in text
    assert (tmp_path / "report" / "figures" / "loss_breakdown_position.png").is_file()
    csv = pd.read_csv(tmp_path / "report" / "tables" / "loss_breakdown_position.csv")
    assert math.isclose(csv["gap_share"].sum(), 1.0, rel_tol=1e-12)
