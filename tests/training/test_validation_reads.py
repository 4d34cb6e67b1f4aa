"""What a validation reads: an early one a fixed subset of the held-out windows
(`train.val_early_tokens`), the final one every window, with the final numbers unchanged by it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from helpers import SMALL_VAL

from fixedcode_study.config import compose as compose_config
from fixedcode_study.data.batches import early_windows
from fixedcode_study.errors import ConfigError
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.parts import TrainSpec
from fixedcode_study.training.job import run_job

TINY = ["model=test_micro", "train.tokens=8192", "train.val_points=4", "train.log_every=2",
        "train.val_batch_size=8", SMALL_VAL, "logger=csv", "input=binary16"]


@pytest.mark.parametrize("n_windows, wanted", [(389, 64), (389, 63), (100, 10), (7, 2), (1000, 3)])
def test_the_early_subset_is_whole_pairs_spread_over_the_split(n_windows, wanted):
    ids = early_windows(n_windows, wanted)
    pairs = -(-wanted // 2)
    assert ids.size == 2 * pairs and len(set(ids.tolist())) == ids.size and ids.max() < n_windows
    assert (ids[0::2] % 2 == 0).all() and (ids[1::2] == ids[0::2] + 1).all()  # as many select as report windows
    gaps = np.diff(ids[0::2])
    assert len(set(gaps.tolist())) <= 1  # evenly spaced
    assert ids[-2] >= (n_windows // 2 // pairs) * 2 * (pairs - 1)  # reaches the end of the split, not its head


def test_a_subset_as_large_as_the_split_is_the_whole_split():
    assert early_windows(10, 10).tolist() == list(range(10))
    assert early_windows(11, 40).tolist() == list(range(11))


def test_early_tokens_is_checked_in_one_line():
    with pytest.raises(ConfigError, match="train.val_early_tokens"):
        JobSpec.from_cfg(compose_config([*TINY, "train.val_early_tokens=0"]))
    with pytest.raises(ConfigError, match="train.val_early_tokens"):
        JobSpec.from_cfg(compose_config([*TINY, "train.val_early_tokens=1.5"]))


def test_a_spec_stored_before_the_setting_reads_every_window():
    spec = JobSpec.from_cfg(compose_config(TINY))
    stored = spec.train.to_json()
    del stored["val_early_tokens"]
    assert TrainSpec.from_json(stored).val_early_tokens is None


def _rows(job: Path, metric: str) -> list[tuple[int, float]]:
    with open(job / "metrics.csv") as fh:
        return [(int(r["step"]), float(r["value"])) for r in csv.DictReader(fh) if r["metric"] == metric]


def test_early_validations_read_the_subset_and_the_final_one_everything(tmp_path):
    subset = run_job(JobSpec.from_cfg(compose_config([*TINY, "train.val_early_tokens=128"])), tmp_path / "subset").record
    whole = run_job(JobSpec.from_cfg(compose_config([*TINY, "train.val_early_tokens=null"])), tmp_path / "whole").record
    # the final validation reads every window, and its numbers do not depend on what the early ones read
    assert subset["final"] == whole["final"]
    tokens = _rows(tmp_path / "subset", "val/tokens")
    last_step = max(step for step, _ in tokens)
    early = {value for step, value in tokens if step < last_step}
    assert early == {subset["validation"]["early_tokens"]} and len(tokens) == 4
    assert dict(tokens)[last_step] == subset["final"]["val_tokens"] == subset["validation"]["final_tokens"]
    assert subset["validation"]["early_tokens"] < subset["final"]["val_tokens"]
    assert subset["validation"]["early_windows"] * subset["config"]["train"]["seq_len"] == subset["validation"]["early_tokens"]
    assert {v for _, v in _rows(tmp_path / "whole", "val/tokens")} == {whole["final"]["val_tokens"]}
    assert whole["validation"] == {"early_windows": None, "early_tokens": None, "final_tokens": whole["final"]["val_tokens"]}
    # an early point is a different (smaller) sample of the same model, so it moves; the training does not
    assert _rows(tmp_path / "subset", "train/loss") == _rows(tmp_path / "whole", "train/loss")
    assert _rows(tmp_path / "subset", "val/loss")[0] != _rows(tmp_path / "whole", "val/loss")[0]
