"""`train.data_part` "k/n": every training window inside the k-th of n equal token ranges of each shard
(the "two teams" of sweeps/composition_teams.yaml), so the parts of one split never share a token.

The memmaps here hold their own positions (token t at offset t), so a batch says where it was read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixedcode_study.config import compose as compose_config
from fixedcode_study.data.batches import (
    GlobalBatchOrder,
    RandomWindowBatches,
    part_bounds,
    shard_probabilities,
)
from fixedcode_study.errors import ConfigError
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.parts import TrainSpec, parse_data_part

SEQ, BATCH = 16, 8


def positions(path: Path, size: int) -> Path:
    np.arange(size, dtype=np.uint32).tofile(path)
    return path


def offsets_read(windows: RandomWindowBatches, steps: int) -> np.ndarray:
    """Every token offset the first `steps` batches read (a batch of positions is its offsets)."""
    return np.concatenate([windows.batch(step).numpy().ravel() for step in range(steps)])


@pytest.mark.parametrize("n", [2, 3])
def test_each_part_reads_only_its_own_range_and_the_parts_are_disjoint(tmp_path, n):
    size = 10_007  # not a multiple of n: the bounds still tile the shard
    path = positions(tmp_path / "train.bin", size)
    read = [offsets_read(RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=3, part=(k, n)), 200)
            for k in range(1, n + 1)]
    for k, offsets in enumerate(read, 1):
        lo, hi = part_bounds(size, (k, n))
        assert offsets.min() >= lo and offsets.max() < hi, (k, offsets.min(), offsets.max(), lo, hi)
        assert offsets.max() - offsets.min() > 0.8 * (hi - lo)  # the draw covers its part, not a corner of it
    for i in range(n):
        for j in range(i + 1, n):
            assert not set(read[i]) & set(read[j])
    assert [part_bounds(size, (k, n)) for k in range(1, n + 1)][-1][1] == size
    assert all(part_bounds(size, (k, n))[1] == part_bounds(size, (k + 1, n))[0] for k in range(1, n))


def test_no_part_is_the_whole_split_bit_for_bit(tmp_path):
    """Without a part the draw is the one every stored run was trained on: offsets from
    default_rng([seed, step, slot]).integers(0, size - T - 1)."""
    size = 5_000
    path = positions(tmp_path / "train.bin", size)
    windows = RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=7, slot=1)
    for step in range(4):
        starts = np.random.default_rng([7, step, 1]).integers(0, size - SEQ - 1, size=BATCH)
        assert np.array_equal(windows.batch(step).numpy()[:, 0], starts)
    # part 1/2 reads the same generator's draw, inside the first half
    half = RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=7, slot=1, part=(1, 2))
    starts = np.random.default_rng([7, 0, 1]).integers(0, size // 2 - SEQ - 1, size=BATCH)
    assert np.array_equal(half.batch(0).numpy()[:, 0], starts)


def test_parts_of_several_shards_stay_in_each_shards_part(tmp_path):
    sizes = [3_001, 800, 12_345]
    paths = []
    for i, size in enumerate(sizes):  # shard i holds i * 1e6 + position, so a token names its shard too
        path = tmp_path / f"shard{i}.bin"
        (np.arange(size, dtype=np.uint32) + i * 1_000_000).tofile(path)
        paths.append(path)
    for k in (1, 2):
        spans = [hi - lo for lo, hi in (part_bounds(s, (k, 2)) for s in sizes)]
        probs = shard_probabilities(spans, ["all"] * 3, {"all": 1.0}, SEQ)
        windows = RandomWindowBatches(paths, np.uint32, SEQ, BATCH, seed=0, probs=probs, part=(k, 2))
        offsets = offsets_read(windows, 100)
        shard, position = offsets // 1_000_000, offsets % 1_000_000
        assert set(shard) == {0, 1, 2}
        for i, size in enumerate(sizes):
            lo, hi = part_bounds(size, (k, 2))
            mine = position[shard == i]
            assert mine.min() >= lo and mine.max() < hi


def test_a_part_too_short_for_a_window_is_one_line_naming_the_part(tmp_path):
    path = positions(tmp_path / "train.bin", 3 * SEQ)
    RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=0)  # the whole split holds a window
    with pytest.raises(ConfigError, match=r"train.seq_len: 16 is longer than part 2/3 of the training split"):
        RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=0, part=(2, 3))


def test_the_global_batch_order_keeps_the_part_on_every_rank_and_slot(tmp_path):
    size = 4_000
    path = positions(tmp_path / "train.bin", size)
    windows = RandomWindowBatches(path, np.uint32, SEQ, BATCH, seed=1, part=(2, 2))
    for rank in (0, 1):
        order = iter(GlobalBatchOrder(windows, rank=rank, world=2, grad_accum=2))
        offsets = np.concatenate([next(order).numpy().ravel() for _ in range(20)])
        assert offsets.min() >= size // 2


@pytest.mark.parametrize("value,problem", [
    ("3/2", "is not a part of the split"), ("0/2", "is not a part of the split"), ("1/1", "is not a part of the split"),
    ("half", "is not a part k/n"), ("1/2/3", "is not a part k/n"), ("2", "is not a part k/n"),
])
def test_a_bad_part_is_one_line_naming_train_data_part(value, problem):
    with pytest.raises(ConfigError, match=rf"^train\.data_part: .*{problem}.*; write \"k/n\"") as err:
        JobSpec.from_cfg(compose_config(["model=test_micro", f"train.data_part={value}"]))
    assert "\n" not in str(err.value)


def test_the_part_is_in_the_spec_and_its_fingerprint():
    specs = {v: JobSpec.from_cfg(compose_config(["model=test_micro", f"train.data_part={v}"]))
             for v in ("null", "1/2", "2/2")}
    assert specs["null"].train.part is None and specs["1/2"].train.part == (1, 2) == parse_data_part(" 1 / 2 ")
    assert len({s.fingerprint["sha"] for s in specs.values()}) == 3
    assert specs["2/2"].fingerprint["settings"]["train.data_part"] == "2/2"
    stored = specs["1/2"].train.to_json()
    assert TrainSpec.from_json(stored).part == (1, 2)
    del stored["data_part"]  # a spec stored before data_part existed trained on the whole split
    assert TrainSpec.from_json(stored).part is None


def test_the_data_module_reads_the_part_of_the_prepared_split(tmp_path):
    """What training reads: TokenDataModule(part=) over a prepared corpus, as training/procedure.py builds it
    from spec.train.part."""
    from helpers.pretokenize import text_files_cfg, write_corpus

    from fixedcode_study.data.batches import TokenDataModule
    from fixedcode_study.data.prepare import prepare

    write_corpus(tmp_path / "corpus")
    prepared = prepare(text_files_cfg(tmp_path / "corpus", tmp_path), progress=False)
    size = prepared.train_shards[0].tokens
    whole, second = (TokenDataModule(prepared, SEQ, BATCH, seed=0, part=part) for part in (None, (2, 2)))
    for dm in (whole, second):
        dm.setup("fit")
    assert whole.train_set.slots[0].lo[0] == 0 and whole.train_set.slots[0].sizes[0] == size
    assert second.train_set.slots[0].lo[0] == size // 2 and second.train_set.slots[0].sizes[0] == size - size // 2
