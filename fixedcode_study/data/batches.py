"""The batches Lightning trains and validates on, read from the prepared token memmaps.

Data order. Training batches are a pure function of (seed, optimizer step, slot). The global
batch of optimizer step g is made of `grad_accum x world` micro-batch *slots*; slot j holds the
`batch_size` windows whose offsets are drawn from numpy's default_rng([seed, g, j])
(RandomWindowBatches.batch). Rank r, at its accumulation micro-step a, trains on slot
a * world + r (GlobalBatchOrder). So:
  - one process accumulating two micro-batches and two processes with one each train on
    identical tokens (world-size invariant), and with grad_accum=1 the slots are just the ranks;
  - a resumed run restarts the order at the checkpoint's step and sees exactly the batches an
    uninterrupted one would.
With several train shards (pre-tokenized data) each row first picks a shard, with probability
proportional to its size within its stream times the stream's mixture weight, then a window
inside that shard (windows never straddle two shards).

A data part (`train.data_part` "k/n", `part_bounds`) keeps every window inside the k-th of n equal
token ranges of each shard: the parts of one split are disjoint, token for token, so two models
trained on 1/2 and 2/2 never see a common training token ("two teams" of sweeps/composition_teams).
Without a part the draw is the one above, bit for bit.

Validation uses every non-overlapping window of the held-out split, sharded across ranks. The
split is made of one segment per source (PreparedData.val_segments; one segment for single-source
data); windows never straddle two segments, so each window has one source label. Windows are
numbered globally, segment after segment, independently of world size and batch size; the even
ones are the "select" half and the odd ones the "report" half of the split (training/task.py).
An *early* validation (any before the last step) may read a fixed, evenly spread subset instead
(`train.val_early_tokens`, `early_windows`): whole pairs of windows (2j, 2j+1), every m-th pair
over the whole split, so both halves and every source are in it, and the same windows every
time. The final validation always reads every window.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from ..errors import ConfigError
from .prepare import PreparedData


def part_bounds(size: int, part: tuple[int, int] | None) -> tuple[int, int]:
    """[lo, hi): the token range of part (k, n) of a shard of `size` tokens (the whole shard for None)."""
    if part is None:
        return 0, int(size)
    k, n = part
    return int(size) * (k - 1) // n, int(size) * k // n


def shard_probabilities(sizes: Sequence[int], streams: Sequence[str], weights: Mapping[str, float],
                        seq_len: int) -> np.ndarray:
    """P(shard k) = weight(stream of k) * windows(k) / windows(stream), over streams that have windows."""
    windows = np.maximum(np.asarray(sizes, dtype=np.float64) - seq_len - 1, 0.0)
    probs = np.zeros(len(sizes))
    for stream in set(streams):
        members = np.array([s == stream for s in streams])
        total = windows[members].sum()
        if total > 0:
            probs[members] = float(weights.get(stream, 0.0)) * windows[members] / total
    if probs.sum() <= 0:
        raise ConfigError("train.seq_len", f"{seq_len} is longer than every training shard ({max(sizes, default=0)} tokens at most)",
                          "use a shorter seq_len or larger shards")
    return probs / probs.sum()


class RandomWindowBatches:
    """`batch(step)`: the (B, T+1) windows of one slot of optimizer step `step`, offsets drawn
    from default_rng([seed, step, slot]).

    `source` is one memmap path or a list of shard paths; `probs` gives each shard's sampling
    probability (default: proportional to the windows it holds).
    """

    def __init__(self, source: str | os.PathLike | Sequence[str | os.PathLike], dtype: np.dtype, seq_len: int,
                 batch_size: int, seed: int, slot: int = 0, probs: Sequence[float] | None = None,
                 part: tuple[int, int] | None = None):
        paths = [Path(source)] if isinstance(source, (str, os.PathLike)) else [Path(p) for p in source]
        if not paths:
            raise ConfigError("data", "no training shards", "pre-tokenize a non-empty corpus")
        self.paths, self.dtype = paths, np.dtype(dtype)
        self.seq_len, self.batch_size, self.seed, self.slot = seq_len, batch_size, seed, slot
        # each shard's token range [lo, lo + size): the whole shard, or its part k of n
        bounds = [part_bounds(p.stat().st_size // self.dtype.itemsize, part) for p in paths]
        self.lo = np.array([lo for lo, _ in bounds], dtype=np.int64)
        self.sizes = np.array([hi - lo for lo, hi in bounds], dtype=np.int64)
        if len(paths) == 1:
            if self.sizes[0] <= seq_len + 1:
                within = "the training split" if part is None else f"part {part[0]}/{part[1]} of the training split"
                raise ConfigError("train.seq_len", f"{seq_len} is longer than {within} ({self.sizes[0]} tokens)",
                                  "use a shorter seq_len" + ("" if part is None else " or fewer parts"))
            self.probs = np.ones(1)
        elif probs is None:
            self.probs = shard_probabilities(self.sizes, ["all"] * len(paths), {"all": 1.0}, seq_len)
        else:
            self.probs = np.asarray(probs, dtype=np.float64)
            self.probs[self.sizes <= seq_len + 1] = 0.0  # such a shard holds no whole window
            if self.probs.size != len(paths) or self.probs.sum() <= 0:
                raise ConfigError("train.seq_len", f"no shard holds a {seq_len + 1}-token window with positive weight",
                                  "use a shorter seq_len or check data.weights")
            self.probs = self.probs / self.probs.sum()
        self._maps: dict[int, np.memmap] = {}

    def _tokens(self, k: int) -> np.memmap:
        if k not in self._maps:  # opened lazily and cached: thousands of shards stay cheap
            self._maps[k] = np.memmap(self.paths[k], dtype=self.dtype, mode="r")
        return self._maps[k]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": {}}  # never pickle memmaps (they would be copied as arrays)

    def with_slot(self, slot: int) -> "RandomWindowBatches":
        view = copy.copy(self)
        view.slot = slot
        return view

    def batch(self, step: int) -> torch.Tensor:
        rng = np.random.default_rng([self.seed, step, self.slot])
        if len(self.paths) == 1:  # the original single-file draw, kept bit-for-bit
            shards = np.zeros(self.batch_size, dtype=np.int64)
            starts = self.lo[0] + rng.integers(0, self.sizes[0] - self.seq_len - 1, size=self.batch_size)
        else:
            shards = rng.choice(len(self.paths), size=self.batch_size, p=self.probs)
            starts = self.lo[shards] + rng.integers(0, self.sizes[shards] - self.seq_len - 1)
        rows = np.stack([self._tokens(k)[s : s + self.seq_len + 1] for k, s in zip(shards, starts)]).astype(np.int64)
        return torch.from_numpy(rows)  # (B, T+1)


class GlobalBatchOrder(IterableDataset):
    """This rank's micro-batches: micro-step m is slot (m % A) * W + r of optimizer step m // A.

    `start_micro_step` is the first micro-step to yield (set from the checkpoint on resume).
    """

    def __init__(self, windows: RandomWindowBatches, rank: int, world: int, grad_accum: int,
                 start_micro_step: int = 0):
        self.rank, self.world, self.grad_accum, self.start_micro_step = rank, world, grad_accum, start_micro_step
        self.slots = [windows.with_slot(a * world + rank) for a in range(grad_accum)]  # the slots this rank owns

    def __iter__(self) -> Iterator[torch.Tensor]:
        m = self.start_micro_step
        while True:
            step, a = divmod(m, self.grad_accum)
            yield self.slots[a].batch(step)  # (B, T+1)
            m += 1


def early_windows(n_windows: int, wanted: int) -> np.ndarray:
    """The global ids of the windows an early validation reads: `wanted` windows rounded up to whole
    (even, odd) pairs, taken as every m-th pair over the whole split (m = pairs there // pairs wanted),
    so the subset spreads over every source and holds as many "select" as "report" windows. Every
    window when the split has no more than that."""
    pairs, available = -(-max(1, wanted) // 2), n_windows // 2
    if pairs >= available:
        return np.arange(n_windows)
    stride = available // pairs
    first = np.arange(pairs) * stride * 2  # the even window of each chosen pair
    return np.stack([first, first + 1], axis=1).reshape(-1)


class ValidationWindows(Dataset):
    """Non-overlapping (T+1)-token windows over the held-out split; rank r takes windows r, r+W, ...

    `segments` are (source, start, end) token ranges of the split (default: the whole file, one
    source). Window k of a segment starts at start + k*T, and a segment of n tokens holds
    (n - 1) // T windows; with one segment that is exactly the split's windows as they always were.
    Windows are numbered across segments in order: `starts[i]` and `labels[i]` (index into
    `sources`) describe global window i, whatever the world size.

    Every rank gets the same number of items, ceil(n_windows / W): ranks short of a window get a
    padding item with weight 0 that adds nothing to the sums. Unequal counts would leave one rank
    in an extra forward (an FSDP all-gather) while the others wait in the final reduce: a hang.
    Items are (window (T+1,), weight, global window index, source label).
    """

    def __init__(self, path: Path, dtype: np.dtype, seq_len: int, rank: int = 0, world_size: int = 1,
                 segments: Sequence[tuple[str, int, int]] | None = None):
        self.tokens = np.memmap(path, dtype=dtype, mode="r")
        self.seq_len = seq_len
        if segments is None:
            segments = [("all", 0, int(self.tokens.size))]
        self.sources: list[str] = list(dict.fromkeys(name for name, _, _ in segments))
        starts, labels = [], []
        for name, start, end in segments:
            if not 0 <= start <= end <= self.tokens.size:
                raise ValueError(f"segment {name} [{start}, {end}) lies outside the {self.tokens.size}-token split")
            n = max(0, (end - start - 1) // seq_len)
            starts.append(start + seq_len * np.arange(n, dtype=np.int64))
            labels.append(np.full(n, self.sources.index(name), dtype=np.int64))
        self.starts, self.labels = np.concatenate(starts), np.concatenate(labels)
        n_windows = self.starts.size
        if n_windows == 0:
            raise ConfigError("data.val_fraction", "the validation split is shorter than one window", "raise val_fraction")
        self.rank, self.world_size = rank, world_size
        self.early: np.ndarray | None = None  # global window ids an early validation reads (None: all)
        self.full_length = -(-n_windows // world_size)
        self.read_all()

    def _read(self, windows: np.ndarray) -> None:
        self.indices = [int(k) for k in windows[self.rank :: self.world_size]]  # the real windows of this rank
        self.length = -(-windows.size // self.world_size)

    def read_all(self) -> None:
        """From now on every window is read (the final validation)."""
        self._read(np.arange(self.starts.size))

    def read_early(self) -> None:
        """From now on only the early subset is read (every window when none is set)."""
        self._read(self.early) if self.early is not None else self.read_all()

    def set_early_tokens(self, tokens: int | None) -> None:
        """Choose the early subset: about `tokens` tokens in whole windows (None: every window)."""
        self.early = None if tokens is None else early_windows(self.starts.size, -(-int(tokens) // self.seq_len))

    def windows_per_source(self) -> dict[str, int]:
        counts = np.bincount(self.labels, minlength=len(self.sources))
        return {name: int(c) for name, c in zip(self.sources, counts)}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        real = i < len(self.indices)
        k = self.indices[i] if real else 0  # padding repeats window 0 with weight 0
        s = int(self.starts[k])
        window = torch.from_numpy(self.tokens[s : s + self.seq_len + 1].astype(np.int64))
        return window, torch.tensor(1.0 if real else 0.0), torch.tensor(k), torch.tensor(int(self.labels[k]))


class CurrentWindows(Sampler):
    """The items of the windows the next validation reads (all, or the early subset), for the one
    validation DataLoader Lightning builds. Its length is the whole split's: Lightning counts a
    validation loader's batches once, at the first validation (an early one), and stops each pass
    at that count, so a count taken from the subset would cut the final validation short. A pass
    over the subset simply ends sooner."""

    def __init__(self, windows: ValidationWindows):
        self.windows = windows

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.windows)))

    def __len__(self) -> int:
        return self.windows.full_length


class TokenDataModule(L.LightningDataModule):
    """Training order GlobalBatchOrder (world-size invariant, resumable), validation windows."""

    def __init__(self, prepared: PreparedData, seq_len: int, batch_size: int, seed: int,
                 val_batch_size: int | None = None, grad_accum: int = 1, val_early_tokens: int | None = None,
                 part: tuple[int, int] | None = None):
        super().__init__()
        self.prepared, self.part = prepared, part
        self.seq_len, self.batch_size, self.seed, self.grad_accum = seq_len, batch_size, seed, grad_accum
        self.val_batch_size = val_batch_size or batch_size
        self.val_early_tokens = val_early_tokens
        self.train_set: GlobalBatchOrder | None = None

    def setup(self, stage: str | None = None) -> None:
        rank = self.trainer.global_rank if self.trainer else 0
        world = self.trainer.world_size if self.trainer else 1
        shards = self.prepared.train_shards
        spans = [hi - lo for lo, hi in (part_bounds(s.tokens, self.part) for s in shards)]
        probs = shard_probabilities(spans, [s.stream for s in shards],
                                    self.prepared.stream_weights, self.seq_len) if len(shards) > 1 else None
        windows = RandomWindowBatches([s.path for s in shards], self.prepared.dtype, self.seq_len, self.batch_size,
                                      self.seed, probs=probs, part=self.part)
        self.train_set = GlobalBatchOrder(windows, rank, world, self.grad_accum)
        self.val_set = ValidationWindows(self.prepared.val_path, self.prepared.dtype, self.seq_len, rank, world,
                                         segments=self.prepared.val_segments)
        self.val_set.set_early_tokens(self.val_early_tokens)

    def early_validation_windows(self) -> int | None:
        """How many windows an early validation reads over all ranks (None: every window). Asked of
        this process's own copy of the split: under ddp_spawn setup() ran in the workers only."""
        windows = ValidationWindows(self.prepared.val_path, self.prepared.dtype, self.seq_len,
                                    segments=self.prepared.val_segments)
        windows.set_early_tokens(self.val_early_tokens)
        return None if windows.early is None else int(windows.early.size)

    def validation_reads(self, final: bool) -> None:
        """What the next validation reads: every window (final) or the early subset. Called before
        Lightning creates the validation iterator (training/schedule.py)."""
        self.val_set.read_all() if final else self.val_set.read_early()

    @property
    def val_sources(self) -> list[str]:
        """Source names of the validation windows, in label order (one name for single-source data)."""
        return list(dict.fromkeys(name for name, _, _ in self.prepared.val_segments))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.val_batch_size, sampler=CurrentWindows(self.val_set),
                          num_workers=0)
