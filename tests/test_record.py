"""The record layer: atomic writes, the job directory, and checkpoints that find their data."""

from __future__ import annotations

import json
import os
import stat

import pytest
from tokenizers import Tokenizer, models

from fixedcode_study.build import build_model
from fixedcode_study.config import compose
from fixedcode_study.errors import ConfigError
from fixedcode_study.record import atomic
from fixedcode_study.record.checkpoint import load_checkpoint, save_checkpoint
from fixedcode_study.record.jobdir import JobDir


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_files_get_the_mode_a_plain_open_would(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic.write_json(tmp_path / "a.json", {"x": 1})
        with atomic.atomic_dir(tmp_path / "folder") as tmp:
            (tmp / "inner").write_text("x")
    finally:
        os.umask(umask)
    # mkstemp/mkdtemp alone would leave 0600/0700: a shared cache unreadable to other users
    assert _mode(tmp_path / "a.json") == 0o666 & ~atomic._UMASK
    assert _mode(tmp_path / "folder") == 0o777 & ~atomic._UMASK


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "results.json"
    atomic.write_json(target, {"status": "running"})
    with pytest.raises(RuntimeError):
        with atomic.atomic_file(target) as fh:
            fh.write('{"status": "compl')
            raise RuntimeError("killed mid-write")
    assert json.loads(target.read_text()) == {"status": "running"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_cache_built_twice_keeps_the_first_copy_in_place(tmp_path):
    final = tmp_path / "cache"
    with atomic.atomic_dir(final, keep_existing=True) as tmp:
        (tmp / "meta.json").write_text("first")
    inode = os.stat(final).st_ino
    with atomic.atomic_dir(final, keep_existing=True) as tmp:  # a second process, finishing later
        (tmp / "meta.json").write_text("second")
    assert (final / "meta.json").read_text() == "first" and os.stat(final).st_ino == inode  # never moved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no .old, no temporary left
    with atomic.atomic_dir(final) as tmp:  # without keep_existing a folder is replaced whole
        (tmp / "meta.json").write_text("replaced")
    assert (final / "meta.json").read_text() == "replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_job_directory_life_cycle(tmp_path):
    job = JobDir(tmp_path / "input=gf2,seed=1")
    assert job.read_results() is None and not job.is_completed() and job.resume_point() is None
    record = job.start_attempt({"status": "running"}, previous=None, new_life=False)
    assert record["attempts"] == 1 and len(record["wandb_id"]) == 12
    job.write_results(record)
    again = job.start_attempt({"status": "running"}, previous=job.read_results(), new_life=False)
    assert again["attempts"] == 2 and again["wandb_id"] == record["wandb_id"]  # every retry continues its W&B run
    fresh = job.start_attempt({"status": "running"}, previous=job.read_results(), new_life=True)
    assert fresh["attempts"] == 1 and fresh["wandb_id"] != record["wandb_id"]

    job.write_results({"status": "completed", "final": {"val_loss": 5.0}, "checkpoint": "checkpoints/final"})
    assert not job.is_completed()  # says completed, but the weights it points to are missing
    job.final_checkpoint.mkdir(parents=True)
    (job.final_checkpoint / "model.safetensors").write_bytes(b"")
    assert job.is_completed() and job.is_trained()
    job.write_results({"status": "eval_failed", "final": {"val_loss": 5.0}, "checkpoint": "checkpoints/final"})
    assert job.is_trained() and not job.is_completed()  # trained, but what it was asked did not all succeed
    assert JobDir.of_final_checkpoint(job.final_checkpoint).path == job.path.resolve()
    assert JobDir.of_final_checkpoint(tmp_path) is None

    job.last_checkpoint.write_bytes(b"state")
    JobDir.partial(job.snapshot(8)).mkdir()  # an interrupted sharded save is a folder
    JobDir.partial(job.last_checkpoint).mkdir()
    (JobDir.partial(job.last_checkpoint) / "shard0").write_bytes(b"")
    assert job.resume_point() == job.last_checkpoint
    job.drop_resume_state()
    assert job.resume_point() is None and not JobDir.partial(job.last_checkpoint).exists()


@pytest.fixture
def saved_checkpoint(tmp_path):
    """An untrained test_micro checkpoint saved where a job puts it, with its job's results.json."""
    cfg = compose(["model=test_micro", "input=gf2", f"data.cache_dir={tmp_path / 'cache'}"])
    tokenizer = tmp_path / "tokenizer.json"
    Tokenizer(models.WordLevel({"<unk>": 0, "<|endoftext|>": 1}, unk_token="<unk>")).save(str(tokenizer))
    job = JobDir(tmp_path / "job")
    save_checkpoint(job.final_checkpoint, build_model(cfg.model, cfg.input), cfg.model, cfg.input, tokenizer,
                    extra={"data": {"cache_key": "k"}, "data_config": cfg.data})
    job.write_results({"status": "completed", "config": {"data": {"source": "from-results-json"}}})
    return job, cfg


def test_load_checkpoint_returns_model_tokenizer_and_the_jobs_data_settings(saved_checkpoint):
    job, cfg = saved_checkpoint
    ckpt = load_checkpoint(job.final_checkpoint)
    assert ckpt.data == {"cache_key": "k"}
    assert ckpt.data_config["cache_dir"] == cfg.data.cache_dir and ckpt.data_config["source"] == "shakespeare"
    assert ckpt.tokenizer.token_to_id("<|endoftext|>") == 1
    assert ckpt.model.input.kind == "gf2" and not ckpt.model.training


def test_a_checkpoint_from_before_data_config_reads_it_from_its_job(saved_checkpoint):
    job, _ = saved_checkpoint
    config_json = job.final_checkpoint / "config.json"
    config = json.loads(config_json.read_text())
    del config["data_config"]
    config_json.write_text(json.dumps(config))
    assert load_checkpoint(job.final_checkpoint).data_config == {"source": "from-results-json"}


def test_a_truncated_weights_file_is_a_one_line_error(saved_checkpoint):
    job, _ = saved_checkpoint
    weights = job.final_checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ConfigError, match=r"^checkpoint: .*model.safetensors is unreadable") as err:
        load_checkpoint(job.final_checkpoint)
    assert "\n" not in str(err.value)
