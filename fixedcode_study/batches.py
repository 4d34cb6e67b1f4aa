"""The batches Lightning trains and validates on, read from the prepared token memmaps.

Training batches are a pure function of (seed, micro-step, rank): each micro-step draws
`batch_size` random windows from the train memmap with numpy's generator seeded by that triple.
A resumed or re-sharded run therefore sees exactly the batches an uninterrupted one would.
Validation uses every non-overlapping window of the held-out split, sharded across ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from .data import PreparedData
from .errors import ConfigError


class RandomWindowBatches(IterableDataset):
    """Micro-batch i (B, T+1) = windows at offsets drawn from default_rng([seed, i, rank])."""

    def __init__(self, path: Path, dtype: np.dtype, seq_len: int, batch_size: int, seed: int,
                 rank: int = 0, start_step: int = 0):
        self.path, self.dtype = path, dtype
        self.seq_len, self.batch_size, self.seed, self.rank = seq_len, batch_size, seed, rank
        self.start_step = start_step  # set on resume so iteration continues where it stopped
        n = np.memmap(path, dtype=dtype, mode="r").size
        if n <= seq_len + 1:
            raise ConfigError("train.seq_len", f"{seq_len} is longer than the training split ({n} tokens)", "use a shorter seq_len")

    def batch(self, step: int) -> torch.Tensor:
        tokens = np.memmap(self.path, dtype=self.dtype, mode="r")
        rng = np.random.default_rng([self.seed, step, self.rank])
        starts = rng.integers(0, tokens.size - self.seq_len - 1, size=self.batch_size)
        rows = np.stack([tokens[s : s + self.seq_len + 1] for s in starts]).astype(np.int64)
        return torch.from_numpy(rows)  # (B, T+1)

    def __iter__(self) -> Iterator[torch.Tensor]:
        step = self.start_step
        while True:
            yield self.batch(step)
            step += 1


class ValidationWindows(Dataset):
    """Non-overlapping (T+1)-token windows over the held-out split; each rank takes every world-th."""

    def __init__(self, path: Path, dtype: np.dtype, seq_len: int, rank: int = 0, world_size: int = 1):
        self.tokens = np.memmap(path, dtype=dtype, mode="r")
        self.seq_len = seq_len
        n_windows = (self.tokens.size - 1) // seq_len
        if n_windows == 0:
            raise ConfigError("data.val_fraction", "the validation split is shorter than one window", "raise val_fraction")
        self.indices = list(range(rank, n_windows, world_size))

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> torch.Tensor:
        s = self.indices[i] * self.seq_len
        return torch.from_numpy(self.tokens[s : s + self.seq_len + 1].astype(np.int64))


class TokenDataModule(L.LightningDataModule):
    def __init__(self, prepared: PreparedData, seq_len: int, batch_size: int, seed: int,
                 val_batch_size: int | None = None):
        super().__init__()
        self.prepared = prepared
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.val_batch_size = val_batch_size or batch_size
        self.train_set: RandomWindowBatches | None = None

    def setup(self, stage: str | None = None) -> None:
        rank = self.trainer.global_rank if self.trainer else 0
        world = self.trainer.world_size if self.trainer else 1
        self.train_set = RandomWindowBatches(
            self.prepared.train_path, self.prepared.dtype, self.seq_len, self.batch_size, self.seed, rank
        )
        self.val_set = ValidationWindows(self.prepared.val_path, self.prepared.dtype, self.seq_len, rank, world)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.val_batch_size, shuffle=False, num_workers=0)
