"""A write that finds no room (full disk, quota, file size limit) loses nothing and says so in one line.

The limits are real: a tmpfs of a few MB mounted under the job (as root; skipped elsewhere, naming
why), and RLIMIT_FSIZE, under which a write past the limit fails with EFBIG once SIGXFSZ is ignored
(everywhere; only the soft limit of this process, around the write or the command). Jobs run
through the command line in this process (helpers.cli.run_cli). What is checked is what a user
sees and keeps: the files read back with safetensors and torch, results.json, the command's exit
status and its terminal.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from helpers.cli import run_cli
from helpers.distributed import TINY, only_job, results
from safetensors.torch import load_file

from fixedcode_study.build import build_model
from fixedcode_study.config import compose
from fixedcode_study.errors import WriteFailed
from fixedcode_study.record.atomic import atomic_file, write_text
from fixedcode_study.record.checkpoint import save_checkpoint
from fixedcode_study.spec import JobSpec

CKPT_EVERY_4 = ["checkpoint.every_steps=4"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _leftovers(folder: Path) -> list[str]:
    """Temporary names a write leaves behind (atomic.py's `.NAME.*.tmp` / `.NAME.tmp-*`, resume's `.NAME.tmp`)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*") if ".tmp" in p.name)


def _one_line_and_no_traceback(proc, needle: str) -> str:
    terminal = proc.stdout + proc.stderr
    assert "Traceback" not in terminal and "Error executing job" not in terminal, terminal[-3000:]
    lines = [line for line in terminal.splitlines() if needle in line]
    assert len(lines) == 1, terminal[-3000:]
    return lines[0]


@contextmanager
def file_size_limit(nbytes: int):
    """RLIMIT_FSIZE for this process (the soft limit only, so it can be raised back)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def _tiny_model():
    cfg = compose(["model=test_micro"])
    torch.manual_seed(0)
    return build_model(cfg.model, cfg.input), cfg


# -- the record's writers, in this process ----------------------------------------------------------
def test_final_weights_get_the_mode_every_record_file_has(tmp_path):
    model, cfg = _tiny_model()
    (tmp_path / "tokenizer.json").write_text("{}")
    ckpt = save_checkpoint(tmp_path / "final", model, JobSpec.from_cfg(cfg).checkpoint_config(), tmp_path / "tokenizer.json")
    want = 0o666 & ~_umask()
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in ckpt.iterdir()}
    assert modes == {"model.safetensors": want, "config.json": want, "tokenizer.json": want}
    assert set(load_file(ckpt / "model.safetensors")) == set(model.state_dict())


def test_final_save_past_the_file_size_limit_names_the_file_and_keeps_the_old_one(tmp_path):
    model, cfg = _tiny_model()
    (tmp_path / "tokenizer.json").write_text("{}")
    target = tmp_path / "checkpoints" / "final"
    save_checkpoint(target, model, JobSpec.from_cfg(cfg).checkpoint_config(), tmp_path / "tokenizer.json")
    before = load_file(target / "model.safetensors")
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    with file_size_limit(64 * 1024), pytest.raises(WriteFailed) as failed:
        save_checkpoint(target, model, JobSpec.from_cfg(cfg).checkpoint_config(), tmp_path / "tokenizer.json")
    assert failed.value.filename == str(target / "model.safetensors")
    assert str(failed.value).startswith(f"file too large writing {target / 'model.safetensors'}; ")
    assert _leftovers(tmp_path) == []
    after = load_file(target / "model.safetensors")  # the previous weights, untouched
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_atomic_write_that_fails_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "results.json"
    write_text(target, "old\n")
    with file_size_limit(4096), pytest.raises(WriteFailed) as failed:
        write_text(target, "x" * 100_000)
    assert failed.value.filename == str(target) and "file too large writing" in str(failed.value)
    with pytest.raises(KeyboardInterrupt), atomic_file(target) as fh:  # Ctrl-C in the middle of a write
        fh.write("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n" and _leftovers(tmp_path) == []


# -- a job, as the command line runs it -------------------------------------------------------------
def _tiny_job(steps: int, *settings: str) -> list[str]:
    """helpers.distributed.TINY, `steps` optimizer steps long (1024 tokens each)."""
    return [*(a for a in TINY if not a.startswith("train.tokens=")), f"train.tokens={1024 * steps}", *settings]


@pytest.mark.parametrize("what, settings, limit", [
    ("checkpoints/last.ckpt", CKPT_EVERY_4, 1024 * 1024),                       # ~1.8 MB with AdamW state
    ("checkpoints/final/model.safetensors", ["checkpoint.every_steps=0"], 256 * 1024),  # ~0.6 MB
])
def test_job_past_the_file_size_limit_fails_in_one_line(tmp_path, what, settings, limit):
    from fixedcode_study.data.prepare import prepare

    args = [*_tiny_job(6, *settings), f"out_root={tmp_path}"]
    prepare(compose(args).data, progress=False)  # the session's token cache, built without the limit
    with file_size_limit(limit):
        proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    job = only_job(tmp_path)
    line = _one_line_and_no_traceback(proc, "file too large writing")
    assert f"file too large writing {job / what}; raise the file size limit (ulimit -f) and re-run" in line
    record = results(job)
    assert record["status"] == "failed" and str(job / what) in record["error"]
    assert _leftovers(job) == []
    assert not (job / "checkpoints" / "final").exists()


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a real filesystem of `size` bytes (tmpfs) for the test; resize(size) grows it."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8); the RLIMIT_FSIZE tests cover the rest")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = []

    def run(*args: str) -> None:
        done = subprocess.run(["mount", *args, str(disk)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()})")

    def mount(size: int) -> Path:
        run("-t", "tmpfs", "-o", f"size={size}", "tmpfs")
        mounted.append(disk)
        return disk

    mount.resize = lambda size: run("-o", f"remount,size={size}")
    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_full_disk_mid_training_keeps_the_last_checkpoint_and_resumes(small_disk):
    model, _ = _tiny_model()
    # last.ckpt holds the weights and AdamW's two moments (fp32); room for one of them and half of
    # the next, plus the small record files: the save at step 4 fits, the one at step 8 does not.
    ckpt_bytes = 12 * sum(p.numel() for p in model.parameters())
    disk = small_disk(int(1.5 * ckpt_bytes) + 512 * 1024)
    args = [*_tiny_job(12, *CKPT_EVERY_4), f"out_root={disk}"]

    full = run_cli(args, cwd=disk)
    assert full.returncode == 1, (full.stdout + full.stderr)[-3000:]
    job = only_job(disk)
    last = job / "checkpoints" / "last.ckpt"
    line = _one_line_and_no_traceback(full, "no space left on device")
    assert f"no space left on device writing {last}; free space and re-run to resume from step 4" in line
    assert _leftovers(job) == []  # the partial save is gone: the disk has room again
    record = results(job)
    assert record["status"] == "failed" and str(last) in record["error"]
    assert torch.load(last, weights_only=True)["global_step"] == 4  # the previous checkpoint, intact

    small_disk.resize(64 * 1024 * 1024)  # space freed: the same command resumes
    again = run_cli(args, cwd=disk)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    record = results(job)
    assert record["status"] == "completed" and record["resumed_from_step"] == 4 and record["steps"] == 12
    assert stat.S_IMODE((job / record["checkpoint"] / "model.safetensors").stat().st_mode) == 0o666 & ~_umask()
