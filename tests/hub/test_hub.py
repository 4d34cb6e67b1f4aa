"""Hugging Face export, import and generation (fixedcode_study/hub/), offline.

An exported folder must load with transformers' own Auto classes (trust_remote_code for the fixed
codes, from the folder alone) and compute the workbench model's function; lm-eval's own `hf` model
on it must reproduce the workbench adapter's numbers; an outside Llama folder must evaluate into a
reference row of the report. References are computed independently here: direct forward passes
and a greedy loop written out in the test, never the code under test.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="lm-eval's HFLM imports accelerate")

from helpers import SMALL_VAL  # noqa: E402
from helpers.eval import trained_checkpoint, untrained_checkpoint, weight_shapes  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from fixedcode_study.cli import evaluate as evaluate_cli  # noqa: E402
from fixedcode_study.cli import export as export_cli  # noqa: E402
from fixedcode_study.cli import generate as generate_cli  # noqa: E402
from fixedcode_study.cli.evaluate import compose_eval_config  # noqa: E402
from fixedcode_study.evaluation.harness import evaluate_checkpoint  # noqa: E402
from fixedcode_study.hub.export import MODELING_FILE, export_checkpoint  # noqa: E402
from fixedcode_study.hub.external import evaluate_external  # noqa: E402
from fixedcode_study.hub.imported import decoder_from_hf  # noqa: E402
from fixedcode_study.record.checkpoint import load_checkpoint  # noqa: E402

ATOL = 1e-5


def random_ids(vocab: int, T: int = 48) -> torch.Tensor:
    ids = torch.randint(0, vocab, (3, T), generator=torch.Generator().manual_seed(7))
    ids[0, :3] = torch.tensor([0, vocab - 1, vocab // 2])
    return ids


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """learned, binary16 and gf2 test_micro models, trained a few steps, exported once."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in ("learned", "binary16", "gf2"):
        ckpt, prepared = trained_checkpoint(name)
        out[name] = (ckpt, export_checkpoint(ckpt, root / name).path, prepared)
    return out


@pytest.mark.parametrize("name", ["learned", "binary16", "gf2"])
def test_export_loads_with_auto_classes_and_computes_the_same_logits(exported, name):
    ckpt_dir, folder, _ = exported[name]
    fixed = name != "learned"
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=fixed).eval()
    ids = random_ids(ours.config.vocab_size)
    with torch.no_grad():
        a, b = ours(ids), theirs(ids).logits
    assert a.abs().max() > 0.1, "logits too small for the tolerance to mean anything"
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    config = json.loads((folder / "config.json").read_text())
    V, d = ours.config.vocab_size, ours.config.d_model
    shapes = weight_shapes(folder)
    assert shapes["lm_head.weight"] == (V, d)  # the head stays an untied V x d projection
    if fixed:
        assert type(theirs).__name__ == "FixedCodeLlamaForCausalLM"
        assert (folder / MODELING_FILE).is_file() and "AutoModelForCausalLM" in config["auto_map"]
        assert not [k for k, s in shapes.items() if s == (V, d) and k != "lm_head.weight"], shapes
        # only the empty (V, 0) placeholder that stops a plain Llama from loading (modeling_fixedcode.py)
        assert [k for k in shapes if k.startswith("model.embed_tokens")] == ["model.embed_tokens.weight"]
        assert shapes["model.embed_tokens.weight"] == (V, 0)
        assert not list(theirs.model.embed_tokens.parameters())  # nothing trainable at the input
    else:
        assert type(theirs).__name__ == "LlamaForCausalLM" and "auto_map" not in config
        assert shapes["model.embed_tokens.weight"] == (V, d)
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert tok.eos_token_id == tok.bos_token_id == 0  # end-of-text conditions an empty context, as in training


@pytest.mark.parametrize("name", ["learned", "gf2"])
def test_exported_model_generates_the_workbench_greedy_continuation(exported, name):
    ckpt_dir, folder, _ = exported[name]
    ours = load_checkpoint(ckpt_dir).model
    theirs = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=name != "learned").eval()
    prompt = torch.tensor([[0, 17, 42, 99]])
    with torch.no_grad():
        # the mask is explicit: the leading end-of-text is also the pad id, which generate would mask
        out = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)  # (1, 12), with the KV cache
        ids = prompt.clone()
        for _ in range(8):  # the reference: the workbench model, full forward per token
            ids = torch.cat([ids, ours(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert out.tolist() == ids.tolist()


@pytest.mark.parametrize("input_name", ["binary16_permuted", "binary16_scaled", "wide", "wide_random",
                                        "gaussian16", "learned_lowdim"])
def test_every_other_input_exports_without_a_vocabulary_by_width_input_tensor(input_name, tmp_path):
    ckpt_dir = untrained_checkpoint(input_name, seed=3)
    exported = export_checkpoint(ckpt_dir, tmp_path / input_name)  # verifies logits and every ID's code
    ours = load_checkpoint(ckpt_dir).model
    V, d = ours.config.vocab_size, ours.config.d_model
    assert exported.max_abs_logit_diff is not None and exported.max_abs_logit_diff <= ATOL
    assert all(shape != (V, d) for shape in exported.input_tensors.values()), exported.input_tensors
    theirs = AutoModelForCausalLM.from_pretrained(str(exported.path), trust_remote_code=True).eval()
    all_ids = torch.arange(V)[None]
    with torch.no_grad():
        assert torch.equal(ours.input(all_ids), theirs.model.embed_tokens(all_ids))
    back, _, _ = decoder_from_hf(exported.path)  # and the import maps it back bit for bit
    a, b = ours.state_dict(), back.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_lm_evals_own_hf_model_on_the_export_matches_the_workbench_adapter(exported, tmp_path):
    ckpt_dir, folder, prepared = exported["gf2"]
    cfg = compose_eval_config(["eval=builtin", "eval.limit=8", "eval.bootstrap_iters=0",
                               f"eval.prepared_root={prepared}"])
    ours = evaluate_checkpoint(ckpt_dir, cfg, write=False)
    theirs = evaluate_external(str(folder), cfg, tmp_path / "study", write=False)
    assert theirs["external"]["architecture"] == "FixedCodeLlamaForCausalLM"
    assert theirs["external"]["trust_remote_code"]  # our own modeling file, byte-identical: trusted
    compared = 0
    for task, metrics in ours["tasks"].items():
        for metric, value in metrics.items():
            if value is None or metric.endswith("_stderr"):
                continue
            assert theirs["tasks"][task][metric] == pytest.approx(value, rel=1e-4, abs=1e-4), (task, metric)
            compared += 1
    assert compared >= 4


@pytest.fixture(scope="module")
def outside_llama(tmp_path_factory):
    """A Hugging Face Llama folder made here (random weights, its own config), with the workbench tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    _, prepared = trained_checkpoint("learned")
    folder = tmp_path_factory.mktemp("outside") / "tiny-llama"
    tok = PreTrainedTokenizerFast(tokenizer_file=str(prepared / "tokenizer.json"), eos_token="<|endoftext|>",
                                  bos_token="<|endoftext|>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=48, intermediate_size=96,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64, tie_word_embeddings=True,
                                         bos_token_id=0, eos_token_id=0))
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder, prepared


@pytest.mark.slow
def test_an_outside_llama_is_evaluated_into_a_reference_row_beside_trained_runs(outside_llama, tmp_path):
    from fixedcode_study.analysis.read.runs import load_run_dirs
    from fixedcode_study.analysis.report import write_report

    from fixedcode_study.config import compose
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    folder, prepared = outside_llama
    study = tmp_path / "multirun" / "main"
    eval_args = ["eval=builtin", "eval.limit=6", "eval.bootstrap_iters=0", f"eval.prepared_root={prepared}"]
    # the corpus the fixture's checkpoint was trained on (SMALL_VAL): prepared already, not prepared again
    cfg = compose(["model=test_micro", "logger=csv", "train.tokens=2048", "train.batch_size=8", "train.val_points=1",
                   SMALL_VAL, f"data.cache_dir={prepared.parent}", *eval_args])
    assert run_job(JobSpec.from_cfg(cfg), study / "input=learned,seed=1").record["status"] == "completed"
    assert evaluate_cli.main([f"hf={folder}", *eval_args, f"study={study}"]) == 0
    records = list(study.glob("external/*/external.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["external"]["source"] == "local" and record["external"]["revision"].startswith("sha256:")
    assert record["external"]["architecture"] == "LlamaForCausalLM" and not record["external"]["trust_remote_code"]

    built = load_run_dirs([study])
    assert len(built.included_jobs) == 1  # the outside model is no job and in no statistic
    out = write_report(built, tmp_path / "report")
    report = out.report.read_text()
    row = next(line for line in report.splitlines() if line.startswith("|") and "external · tiny-llama @ sha256:" in line)
    # both were scored on eval.limit=6 examples per task, and the report says so
    assert "was scored on at most 6 examples per task (eval.limit)" in report
    bpb = record["tasks"]["fixedcode_heldout_ppl"]["bits_per_byte"]
    shown = [float(x) for x in re.findall(r"\d+\.\d+", row)]
    assert any(abs(x - bpb) < 1e-3 for x in shown), (bpb, row)  # its own number, beside the trained run
    table = (tmp_path / "report" / "tables" / "eval_results.csv").read_text()
    assert "reference, evaluated here (outside model)" in table and "this study" in table


def test_probe_accepts_an_outside_model(outside_llama, tmp_path, capsys):
    from fixedcode_study.cli import probe as probe_cli

    folder, _ = outside_llama
    assert probe_cli.main([f"hf={folder}", f"study={tmp_path}", "probe.tokens=1024", "probe.classes=32",
                           "probe.cross=false"]) == 0
    (out,) = tmp_path.glob("external/*/probes.json")
    record = json.loads(out.read_text())
    (final,) = record["models"]
    assert final["label"] == "final" and final["layers"][0] == "input"
    # a learned table at the input: the current token is readable there by construction
    assert final["identity"]["offset0"][0]["accuracy"] > 0.9


def test_generate_is_seeded_and_bad_settings_are_one_line(exported, capsys):
    ckpt_dir, _, _ = exported["binary16"]
    args = [f"checkpoint={ckpt_dir}", "prompt=To be", "n=2", "max_new_tokens=12"]
    runs = []
    for seed in (1, 1, 2):
        assert generate_cli.main([*args, f"seed={seed}"]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert runs[0].count("--- sample") == 2
    for bad, field in (("temperature=-1", "temperature"), ("n=zero", "n"), ("colour=red", "colour")):
        assert generate_cli.main([*args, bad]) == 2  # main returns the exit code (cli/args.py)
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {field}:") and "\n" not in err


def test_export_refuses_to_overwrite_and_names_bad_fields(exported, tmp_path, capsys):
    ckpt_dir, folder, _ = exported["learned"]
    for args, field in (([f"checkpoint={ckpt_dir}", f"out={folder}"], "out"),
                        ([f"out={tmp_path / 'x'}"], "checkpoint"),
                        ([f"checkpoint={tmp_path / 'nowhere'}", f"out={tmp_path / 'y'}"], "checkpoint")):
        assert export_cli.main(args) == 2  # main returns the exit code (cli/args.py)
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {field}:") and "\n" not in err
    assert not (tmp_path / "y").exists()


def test_samples_of_a_study_reach_the_report_only_while_they_describe_the_job(exported, tmp_path, capsys):
    import shutil

    from fixedcode_study.analysis.read.runs import load_run_dirs
    from fixedcode_study.analysis.report import write_report

    ckpt_dir, _, _ = exported["gf2"]
    job = tmp_path / "study" / "input=gf2,seed=1"
    shutil.copytree(ckpt_dir.parent.parent, job, ignore=shutil.ignore_patterns("wandb", "last.ckpt*"))
    assert generate_cli.main([f"checkpoint={job.parent}", "prompt=KING HENRY:", "n=2", "max_new_tokens=10"]) == 0
    printed = capsys.readouterr().out
    samples = json.loads((job / "samples.json").read_text())
    (entry,) = samples["prompts"]
    assert entry["prompt"] == "KING HENRY:" and len(entry["samples"]) == 2
    assert entry["samples"][0] in printed
    report = write_report(load_run_dirs([job.parent]), tmp_path / "report").report.read_text()
    assert "## Samples" in report and "KING HENRY:" + entry["samples"][0].rstrip() in report

    results = json.loads((job / "results.json").read_text())
    results["finished_at"] = "2099-01-01T00:00:00+0000"  # as if the job had been retrained since
    (job / "results.json").write_text(json.dumps(results))
    report = write_report(load_run_dirs([job.parent]), tmp_path / "report2").report.read_text()
    assert "## Samples" not in report and "samples.json left out" in report
