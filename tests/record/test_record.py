"""The record layer: atomic writes, the job directory, and checkpoints that find their data."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
import torch
from helpers import SMALL_VAL
from tokenizers import Tokenizer, models

from fixedcode_study.build import build_model
from fixedcode_study.config import compose, plain
from fixedcode_study.errors import ConfigError
from fixedcode_study.record import atomic
from fixedcode_study.record.checkpoint import load_checkpoint, save_checkpoint
from fixedcode_study.record.jobdir import JobDir
from fixedcode_study.spec import EvalSpec, JobSpec
from fixedcode_study.training.job import run_job


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
    save_checkpoint(job.final_checkpoint, build_model(cfg.model, cfg.input),
                    {**JobSpec.from_cfg(cfg).checkpoint_config(), "data": {"cache_key": "k"}}, tokenizer)
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


# -- a stored model means the same thing whatever conf/ says later --------------------------------------
TINY_JOB = ["model=test_micro", "logger=csv", "train.tokens=2048", "train.batch_size=4", "train.val_points=1",
            "train.log_every=4", "train.val_batch_size=64", "train.compile=false", "checkpoint.every_steps=4",
            "checkpoint.keep_last=true", SMALL_VAL]


@pytest.fixture
def own_conf(tmp_path, monkeypatch):
    """A copy of conf/ this test may edit, read in place of the checkout's (config.CONFIG_DIR)."""
    from fixedcode_study import config

    copy = tmp_path / "conf"
    shutil.copytree(config.CONFIG_DIR, copy)
    monkeypatch.setattr(config, "CONFIG_DIR", str(copy))
    return copy


def _builtin(**settings) -> EvalSpec:
    return EvalSpec.of({**plain(compose(["eval=builtin"]).eval), "bootstrap_iters": 0, **settings})


def test_a_gaussian16_checkpoint_loads_evaluates_and_exports_the_same_after_binary16_yaml_changes(own_conf, tmp_path):
    """gaussian16's scale matches binary16's input RMS (rms_reference: binary16). Its checkpoint stores
    binary16's settings as they were (the resolved spec), so editing conf/input/binary16.yaml afterwards
    changes nothing a load, an evaluation or an export computes; re-resolving the name (what every load
    did before the spec was stored) gives another model."""
    from transformers import AutoModelForCausalLM

    from fixedcode_study.evaluation.harness import evaluate_checkpoint
    from fixedcode_study.hub.export import export_checkpoint
    from fixedcode_study.training.resume import checkpoint_spec

    spec = JobSpec.from_cfg(compose([*TINY_JOB, "input=gaussian16", f"out_root={tmp_path}"]))
    record = run_job(spec, tmp_path / "job").record
    assert record["status"] == "completed", record.get("error")
    final = tmp_path / "job" / record["checkpoint"]
    stored = json.loads((final / "config.json").read_text())
    assert stored["format_version"] == 2 and stored["spec"] == record["spec"] == spec.to_json()
    assert checkpoint_spec(JobDir(tmp_path / "job").last_checkpoint) == record["spec"]  # the resume state's too
    ids = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(0))

    def observe(tag: str):
        ckpt = load_checkpoint(final)
        with torch.no_grad():
            logits = ckpt.model(ids)
        evaluated = evaluate_checkpoint(final, _builtin(limit=2), write=False)
        exported = AutoModelForCausalLM.from_pretrained(str(export_checkpoint(final, tmp_path / f"export-{tag}").path),
                                                        trust_remote_code=True, dtype=torch.float32).eval()
        with torch.no_grad():
            hf_logits = exported(ids).logits
        return ckpt.model.input.scale, logits, evaluated, hf_logits

    scale, logits, evaluated, hf_logits = observe("before")
    path = own_conf / "input" / "binary16.yaml"
    path.write_text(path.read_text().replace('values: "01"', 'values: "pm1"'))  # binary16's RMS: 0.61 -> 1.0
    composed = record["config"]
    assert composed["input"]["rms_reference"] == "binary16"
    assert build_model(composed["model"], composed["input"]).input.scale != scale  # the name means another model now
    scale_after, logits_after, evaluated_after, hf_after = observe("after")
    assert scale_after == scale and torch.equal(logits_after, logits) and torch.equal(hf_after, hf_logits)
    assert evaluated_after["tasks"] == evaluated["tasks"] and evaluated_after["model_spec"] == "stored"


def write_format_1_checkpoint(directory, cfg, model, tokenizer_path, data) -> None:
    """A checkpoint as record/checkpoint.py wrote it before the spec was stored (format 1, up to
    df7fb7e): model.safetensors (metadata format_version "1"), tokenizer.json, and a config.json with
    the model preset and the input and head configs as composed (a referenced variant by its name:
    a load resolved it against conf/), their properties, the data facts and settings, seed, study and
    the fingerprint's sha."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"), metadata={"format_version": "1"})
    config = {"format_version": 1, "model": plain(cfg.model), "input": plain(cfg.input),
              "input_props": model.input.properties(), "output_props": model.head.properties(),
              "output": plain(cfg.output), "data": data, "data_config": plain(cfg.data), "seed": int(cfg.seed),
              "sweep": str(cfg.name), "fingerprint": "0" * 64}
    (directory / "config.json").write_text(json.dumps(config, indent=2, default=str))
    shutil.copyfile(tokenizer_path, directory / "tokenizer.json")


def test_a_checkpoint_from_before_the_stored_spec_loads_and_its_records_say_it_was_reconstructed(tmp_path):
    from helpers.eval import trained_checkpoint

    from fixedcode_study.evaluation.harness import evaluate_checkpoint
    from fixedcode_study.probing.states import find_subjects, subject_summary
    from fixedcode_study.record.checkpoint import RECONSTRUCTED

    trained, prepared_root = trained_checkpoint("learned")  # its tokenizer and held-out data
    cfg = compose(["model=test_micro", "input=gaussian16"])
    model = build_model(cfg.model, cfg.input, seed=3, output_cfg=cfg.output)  # as the old code built it
    old = tmp_path / "old"
    write_format_1_checkpoint(old, cfg, model, prepared_root / "tokenizer.json",
                              json.loads((trained / "config.json").read_text())["data"])
    loaded = load_checkpoint(old)
    assert loaded.model_spec == RECONSTRUCTED and loaded.spec_note.startswith("reconstructed: a format-1 checkpoint")
    ids = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded.model(ids), model.eval()(ids))
    assert loaded.model.input.scale == model.input.scale
    evaluated = evaluate_checkpoint(old, _builtin(limit=2), prepared_root=prepared_root, write=False)
    assert evaluated["model_spec"] == loaded.spec_note  # the record made from it says so
    (subject,) = find_subjects(old)
    assert subject_summary(subject)["model_spec"] == loaded.spec_note


def test_the_code_hash_covers_what_computes_a_model_and_not_what_shows_it(tmp_path, monkeypatch):
    """An edit of the source that computes a trained model changes the fingerprint's code hash; an edit of
    logging or the terminal does not."""
    from fixedcode_study.record import fingerprint

    copy = tmp_path / "fixedcode_study"
    shutil.copytree(fingerprint.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "analysis"))
    monkeypatch.setattr(fingerprint, "PACKAGE_DIR", copy)
    for edited, counts in (("model.py", True), ("inputs/binary.py", True), ("inputs/gf2.py", True),
                           ("heads/linear.py", True), ("data/prepare.py", True), ("training/task.py", True),
                           ("training/loggers.py", False), ("console.py", False)):
        before = fingerprint.code_sha.__wrapped__()
        with open(copy / edited, "a") as fh:
            fh.write("\n# an edit\n")
        assert (fingerprint.code_sha.__wrapped__() != before) is counts, edited


def test_an_ignored_setting_drops_its_own_keys_only_and_the_sha_carries_the_code(monkeypatch):
    from fixedcode_study.record import fingerprint

    assert fingerprint.ignored("eval", ["eval"]) and fingerprint.ignored("eval.limit", ["eval"])
    assert not fingerprint.ignored("evaluator", ["eval"]) and not fingerprint.ignored("trainer.devices_x", ["trainer.devices"])
    config = {"seed": 1, "eval": {"limit": 4}, "evaluator": "x"}
    first = fingerprint.fingerprint(config, ["eval"])
    assert "evaluator" in first["settings"] and not any(k.startswith("eval.") for k in first["settings"])
    monkeypatch.setattr(fingerprint, "code_sha", lambda: "other code")
    other = fingerprint.fingerprint(config, ["eval"])
    assert other["settings_sha"] == first["settings_sha"] and other["sha"] != first["sha"]
