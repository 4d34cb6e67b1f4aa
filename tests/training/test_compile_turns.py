"""The compile turn (training/compile_turns.py) is held exactly at the steps that compile: a fit's
first training step, and each validation whose batch count is new to the fit, unless a job with the
same graph key passed them with this cache before; another holder makes the job wait, and a failing
step gives the turn back and marks nothing."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fixedcode_study.training.compile_turns import CompileTurns, turn_lock_path
from helpers import SMALL_VAL
from helpers.locks import held_elsewhere


class Probe(L.LightningModule):
    """A linear model that notes, at each step, whether the turn is held."""

    def __init__(self, path: Path, fail_at: int | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.path, self.fail_at = path, fail_at
        self.train_held: list[bool] = []
        self.val_held: list[tuple[int, bool]] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.fail_at is not None and self.global_step == self.fail_at:
            raise RuntimeError("planted")
        self.train_held.append(held_elsewhere(self.path))
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        if batch_idx == 0:
            self.val_held.append((int(self.trainer.num_val_batches[0]), held_elsewhere(self.path)))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader(n: int) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)), batch_size=2)


def _trainer(turns: CompileTurns, steps: int) -> L.Trainer:
    return L.Trainer(max_steps=steps, val_check_interval=2, check_val_every_n_epoch=None, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, accelerator="cpu", callbacks=[turns])


def test_the_turn_is_held_at_the_first_step_and_at_each_new_validation_length(tmp_path: Path) -> None:
    path = tmp_path / "turn.lock"
    module, turns = Probe(path), CompileTurns("k", path)
    trainer = _trainer(turns, steps=6)
    trainer.fit(module, train_dataloaders=_loader(40), val_dataloaders=_loader(6))
    assert module.train_held == [True, False, False, False, False, False]
    assert module.val_held == [(3, True), (3, False), (3, False)]   # validations at steps 2, 4, 6
    trainer.validate(module, dataloaders=_loader(10), verbose=False)  # a new length: 5 batches
    trainer.validate(module, dataloaders=_loader(10), verbose=False)
    assert module.val_held[3:] == [(5, True), (5, False)]
    assert not held_elsewhere(path) and turns.waited == 0.0


def test_a_job_whose_graphs_compiled_in_this_cache_before_takes_no_turn(tmp_path: Path) -> None:
    path = tmp_path / "turn.lock"
    _trainer(CompileTurns("k", path), steps=2).fit(Probe(path), train_dataloaders=_loader(8), val_dataloaders=_loader(4))
    assert sorted(p.name for p in tmp_path.glob("fixedcode-compiled-*")) == [
        "fixedcode-compiled-k-train", "fixedcode-compiled-k-validate-2"]
    again, other = Probe(path), Probe(path)  # the same key: warm, no turn; another key: its own turns
    _trainer(CompileTurns("k", path), steps=2).fit(again, train_dataloaders=_loader(8), val_dataloaders=_loader(4))
    _trainer(CompileTurns("j", path), steps=2).fit(other, train_dataloaders=_loader(8), val_dataloaders=_loader(4))
    assert again.train_held == [False, False] and again.val_held == [(2, False)]
    assert other.train_held == [True, False] and other.val_held == [(2, True)]


def test_a_job_waits_while_another_holds_the_turn(tmp_path: Path) -> None:
    path = tmp_path / "turn.lock"
    other = open(path, "a+")
    fcntl.flock(other, fcntl.LOCK_EX)
    release = threading.Timer(0.3, lambda: (fcntl.flock(other, fcntl.LOCK_UN), other.close()))
    release.start()
    module, turns = Probe(path), CompileTurns("k", path)
    _trainer(turns, steps=2).fit(module, train_dataloaders=_loader(8), val_dataloaders=_loader(4))
    release.join()
    assert turns.waited > 0.0 and module.train_held[0]
    assert not held_elsewhere(path)


def test_a_failing_first_step_gives_the_turn_back(tmp_path: Path) -> None:
    path = tmp_path / "turn.lock"
    module, turns = Probe(path, fail_at=0), CompileTurns("k", path)
    with pytest.raises(RuntimeError, match="planted"):
        _trainer(turns, steps=2).fit(module, train_dataloaders=_loader(8), val_dataloaders=_loader(4))
    assert not held_elsewhere(path)
    assert not list(tmp_path.glob("fixedcode-compiled-*"))  # a failed step marks nothing compiled


def test_the_turn_lives_in_the_inductor_cache_the_jobs_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    assert turn_lock_path() == tmp_path / "inductor" / "fixedcode-compile-turn"
    turns = CompileTurns("k")
    turns._take("check", "check")  # the folder is made; nothing else holds it: no wait
    assert held_elsewhere(turn_lock_path()) and turns.waited == 0.0
    turns._give()
    assert not held_elsewhere(turn_lock_path())


def test_the_graph_key_follows_the_graphs_not_the_seed_or_data() -> None:
    from fixedcode_study.config import compose
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.compile_turns import graph_key

    def key(*overrides: str) -> str:
        return graph_key(JobSpec.from_cfg(compose(["model=test_micro", *overrides])))

    base = key()
    assert key("seed=7") == base and key("train.tokens=4096") == base
    assert key("input=binary16") != base and key("train.batch_size=3") != base and key("threads=1") != key("threads=3")


@pytest.mark.slow
def test_a_compiled_job_waits_for_the_turn_then_marks_its_graphs_compiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A real compiled job (test_micro, train.compile=true) in its own inductor cache: it waits while
    another holder has the turn, completes, and leaves the markers a later job of its graph key reads.
    Its cache starts cold, so every graph is compiled here: each validation reads every held-out window
    (val_early_tokens=null) in one batch, so the validation graphs are compiled once, not again for an
    early subset's shape and for a smaller last batch (dynamic shapes)."""
    from fixedcode_study.config import compose
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.compile_turns import graph_key
    from fixedcode_study.training.job import run_job

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    spec = JobSpec.from_cfg(compose(["model=test_micro", "logger=csv", "train.tokens=4096", "train.batch_size=8",
                                     "train.val_points=2", SMALL_VAL, "train.val_early_tokens=null",
                                     "train.val_batch_size=512", "train.compile=true", "threads=1",
                                     f"out_root={tmp_path}"]))
    lock = turn_lock_path()
    lock.parent.mkdir(parents=True, exist_ok=True)
    other = open(lock, "a+")
    fcntl.flock(other, fcntl.LOCK_EX)
    caplog.set_level("INFO", logger="fixedcode_study.training.compile_turns")

    def release_once_waiting() -> None:  # the holder gives the turn up once the job says it waits
        while not any("waiting for another job's compile" in r.getMessage() for r in list(caplog.records)):
            time.sleep(0.05)
        fcntl.flock(other, fcntl.LOCK_UN)
        other.close()

    release = threading.Thread(target=release_once_waiting, daemon=True)
    release.start()
    before = torch.get_num_threads()
    try:
        record = run_job(spec, tmp_path / "job").record
    finally:
        torch.set_num_threads(before)
        release.join(timeout=5)
    assert record["status"] == "completed" and record["runtime"]["compile"] is True
    assert "waited" in caplog.text and "for another job's compile before the first training step" in caplog.text
    key = graph_key(spec)
    marks = sorted(p.name.removeprefix(f"fixedcode-compiled-{key}-") for p in lock.parent.glob(f"fixedcode-compiled-{key}-*"))
    assert marks[0] == "train" and len(marks) > 1 and all(m.startswith("validate-") for m in marks[1:]), marks
