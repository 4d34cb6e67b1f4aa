"""Evaluation suites end to end: built-in tasks, the offline mirror of the paper's suite, the CLI,
the eval record, the request cache and configuration errors."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest
from helpers.eval import SHARED_EVAL, mirror_available, trained_checkpoint, untrained_checkpoint
from lm_eval.api.instance import Instance
from safetensors.torch import load_file, save_file

from fixedcode_study.errors import ConfigError
from fixedcode_study.evaluation.tasks import write_tasks
from fixedcode_study.evaluation.tasks.builtin import HELDOUT_LASTWORD, HELDOUT_PPL, derive_files, lastword_passages
from fixedcode_study.cli.evaluate import compose_eval_config
from fixedcode_study.spec import EvalSpec
from fixedcode_study.evaluation.harness import evaluate_checkpoint, wandb_metrics
from fixedcode_study.evaluation.lm import FixedCodeLM

PAPER_METRICS = {"hellaswag": ["acc_norm"], "piqa": ["acc"], "lambada_openai": ["acc", "perplexity"],
                 "arc_easy": ["acc_norm"], "wikitext": ["word_perplexity"], "commonsense_qa": ["acc"], "mmlu": ["acc"]}
OFFLINE = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def trained():
    return trained_checkpoint("learned")


def builtin_cfg(**overrides):
    """eval=builtin with some settings replaced, validated as a job's spec validates them."""
    return EvalSpec.of({**compose_eval_config(["eval=builtin"]).record(), **overrides})


def test_builtin_tasks_score_held_out_documents_like_wikitext(trained, tmp_path):
    ckpt, prepared_root = trained
    record = evaluate_checkpoint(ckpt, builtin_cfg(limit=4, output=str(tmp_path / "e.json")), prepared_root=prepared_root)
    ppl, lastword = record["tasks"][HELDOUT_PPL], record["tasks"][HELDOUT_LASTWORD]
    assert set(ppl) >= {"word_perplexity", "byte_perplexity", "bits_per_byte"}
    assert set(lastword) >= {"acc", "acc_stderr", "perplexity", "perplexity_stderr"}
    assert json.loads((tmp_path / "e.json").read_text())["tasks"] == record["tasks"]

    # Recompute the document metrics from the adapter's rolling log-likelihoods with wikitext's formulas.
    docs = [json.loads(line) for line in (prepared_root / "val_docs.jsonl").read_text(encoding="utf-8").splitlines()][:4]
    lm = FixedCodeLM(checkpoint=ckpt, batch_size=32)
    lls = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (d["text"],), i) for i, d in enumerate(docs)],
                                   disable_tqdm=True)
    words = sum(len(re.split(r"\s+", d["text"])) for d in docs)
    n_bytes = sum(len(d["text"].encode("utf-8")) for d in docs)
    assert ppl["word_perplexity"] == pytest.approx(math.exp(-sum(lls) / words), rel=1e-6)
    assert ppl["bits_per_byte"] == pytest.approx(-sum(lls) / n_bytes / math.log(2), rel=1e-6)
    assert ppl["byte_perplexity"] == pytest.approx(2 ** ppl["bits_per_byte"], rel=1e-9)
    # Close to the training-time validation bits per byte (same model, same documents, other windows).
    assert ppl["bits_per_byte"] == pytest.approx(json.loads((ckpt.parent.parent / "results.json").read_text())
                                                 ["final"]["val_bpb"], rel=0.1)
    assert record["weights_sha256"] and record["lm_eval_version"] and record["settings"]["limit"] == 4
    assert wandb_metrics(record)[f"eval/{HELDOUT_LASTWORD}/acc"] == lastword["acc"]


def test_lastword_passages_end_in_a_clause_closing_word_and_files_are_reused(trained):
    text = ("PUCK How now, spirit! whither wander you? Fairy Over hill, over dale, Thorough bush, thorough brier; "
            "I do wander everywhere, Swifter than the moon's sphere; And I serve the fairy queen.")
    assert list(lastword_passages([text], 12, 10)) == [
        "PUCK How now, spirit! whither wander you",  # "you?" closes a sentence; "dale," does not
        "Fairy Over hill, over dale, Thorough bush, thorough brier",
        "I do wander everywhere, Swifter than the moon's sphere",
    ]  # the tail "And I serve the fairy queen." has less than 12 // 2 words of context
    passages = list(lastword_passages([text], 12, 10))
    assert list(lastword_passages([text], 12, 1)) == passages[:1]

    _, root = trained
    files = derive_files(root, {"lastword_words": 30, "lastword_max_passages": 7})
    rows = [json.loads(line) for line in files[HELDOUT_LASTWORD].read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 7 and all(set(r) == {"text"} for r in rows)
    before = files[HELDOUT_LASTWORD].stat().st_mtime_ns
    assert derive_files(root, {"lastword_words": 30, "lastword_max_passages": 7}) == files
    assert files[HELDOUT_LASTWORD].stat().st_mtime_ns == before
    assert not list(files[HELDOUT_LASTWORD].parent.glob(".*"))  # no temporary files left behind


@pytest.mark.slow
@pytest.mark.skipif(not mirror_available(*PAPER_METRICS), reason="shared eval mirror absent")
def test_paper_suite_runs_offline_on_the_mirror_through_the_cli(trained, tmp_path):
    ckpt, _ = trained
    out = tmp_path / "paper.json"
    proc = subprocess.run(
        [sys.executable, "-m", "fixedcode_study", "evaluate", f"checkpoint={ckpt}", "eval=paper", "eval.limit=2",
         f"eval.data_dir={SHARED_EVAL}", f"eval.output={out}"],
        capture_output=True, text=True, env=OFFLINE, cwd=tmp_path, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.read_text())
    for task, metrics in PAPER_METRICS.items():
        for metric in metrics:
            assert isinstance(record["headline"][task][metric], float), (task, metric)
    assert record["tasks"]["mmlu"]["acc_stderr"] > 0 and len(record["subtasks"]) == 57 + 4
    assert record["n_samples"]["hellaswag"] == 2 and record["settings"]["num_fewshot"] == 0
    assert record["lm_eval_version"] == "0.4.13" or record["lm_eval_version"].startswith("0.4")
    assert "[eval] paper" in proc.stdout and "hellaswag: acc=" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(not mirror_available("hellaswag"), reason="shared eval mirror absent")
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_lm_eval_cli_runs_our_model_with_generated_task_folder(trained, tmp_path, monkeypatch, capsys):
    """`fixedcode lm-eval` is lm-eval's own CLI with `fixedcode` registered (cli/lm_eval_model.py, run
    in-process through runpy, exactly as `-m` runs it, to spare a second interpreter start)."""
    import runpy

    ckpt, root = trained
    folder = write_tasks(["hellaswag", HELDOUT_PPL], tmp_path / "tasks", data_dir=SHARED_EVAL, prepared_root=root)
    monkeypatch.setattr(sys, "argv", [
        "lm_eval", "--model", "fixedcode", "--model_args", f"checkpoint={ckpt}", "--tasks", f"hellaswag,{HELDOUT_PPL}",
        "--include_path", str(folder.include_path), "--limit", "2", "--batch_size", "4", "--device", "cpu",
        "--output_path", str(tmp_path / "out"),
    ])
    runpy.run_module("fixedcode_study.cli.lm_eval_model", run_name="__main__")
    table = capsys.readouterr().out
    assert "hellaswag" in table and "acc_norm" in table and "word_perplexity" in table
    saved = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert saved["config"]["model"] == "fixedcode" and saved["config"]["checkpoint"] == str(ckpt.resolve())
    assert saved["results"]["hellaswag"]["acc_norm,none"] in (0.0, 0.5, 1.0)


def test_request_cache_is_never_shared_between_different_weights(trained, tmp_path):
    ckpt, root = trained
    changed = tmp_path / "changed"
    shutil.copytree(ckpt, changed)
    state = load_file(str(changed / "model.safetensors"))
    state["head.weight"] = state["head.weight"] * 1.5  # same path layout, config and tokenizer; other weights
    save_file(state, str(changed / "model.safetensors"), metadata={"format_version": "1"})

    cfg = builtin_cfg(limit=2, use_cache=True, cache_dir=str(tmp_path / "cache"), tasks=[HELDOUT_PPL])
    first = evaluate_checkpoint(ckpt, cfg, prepared_root=root, write=False)
    second = evaluate_checkpoint(changed, cfg, prepared_root=root, write=False)
    again = evaluate_checkpoint(ckpt, cfg, prepared_root=root, write=False)
    assert second["tasks"] != first["tasks"]
    assert again["tasks"] == first["tasks"]
    assert len(list((tmp_path / "cache" / "lm_eval_requests").iterdir())) == 2


def test_prepared_root_is_found_from_the_checkpoint_and_checked(trained, tmp_path):
    ckpt, root = trained
    from fixedcode_study.record.checkpoint import load_checkpoint
    from fixedcode_study.evaluation.harness import find_prepared_root

    config = load_checkpoint(ckpt).config
    assert find_prepared_root(ckpt, config, None, str(tmp_path)) == root.resolve()  # via the checkpoint's data_config
    other = tmp_path / "other"
    other.mkdir()
    (other / "meta.json").write_text(json.dumps({"cache_key": "not-this-corpus"}))
    with pytest.raises(ConfigError, match=r"^eval.prepared_root: cache not-this-corpus is not the checkpoint's corpus"):
        find_prepared_root(ckpt, config, str(other), None)


@pytest.mark.parametrize("overrides, field", [
    ({"tasks": []}, "eval.tasks"),
    ({"tasks": ["no_such_task"], "data_dir": str(SHARED_EVAL)}, "eval.tasks"),
    ({"tasks": ["hellaswag"], "data_dir": "/definitely/not/here"}, "eval.data_dir"),
    ({"batch_size": 0}, "eval.batch_size"),
    ({"dtype": "float8"}, "eval.dtype"),
])
def test_bad_eval_settings_fail_with_one_line_naming_the_field(trained, overrides, field, tmp_path):
    ckpt, root = trained
    if overrides.get("data_dir") == str(SHARED_EVAL) and not SHARED_EVAL.is_dir():
        pytest.skip("shared eval mirror absent")
    with pytest.raises(ConfigError) as err:
        evaluate_checkpoint(ckpt, builtin_cfg(**overrides), prepared_root=root, write=False)
    assert str(err.value).startswith(f"{field}:") and "\n" not in str(err.value)


def test_missing_mirror_file_names_the_file(tmp_path):
    (tmp_path / "piqa").mkdir()
    with pytest.raises(ConfigError, match=r"^eval.data_dir: task piqa needs .*piqa/validation.jsonl \(missing\)"):
        write_tasks(["piqa"], tmp_path / "tasks", data_dir=tmp_path)


def test_cli_without_a_suite_or_checkpoint_exits_2_with_one_line(trained, capsys):
    from fixedcode_study.cli.evaluate import main

    ckpt, _ = trained
    for args in ([f"checkpoint={ckpt}"], ["eval=builtin"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.strip().count("\n") == 0, err


@pytest.mark.slow
@pytest.mark.skipif(not mirror_available(*PAPER_METRICS), reason="shared eval mirror absent")
def test_paper_suite_matches_hflm_task_for_task(tmp_path):
    """Same mirror tasks, lm-eval's HFLM on the equivalent Llama: every metric agrees. A longer
    context than test_micro's 64 tokens, because HFLM refuses continuations longer than the context
    (the first three piqa documents hold an 84-token solution); at 128 tokens most lambada and mmlu
    inputs are cut from the left, so the truncation is compared too. Three documents a task: the
    perplexities are continuous, so any change in a score shows there. Randomised weights: a freshly
    initialised model predicts nearly alike whatever the context, which hides a wrong rolling window."""
    pytest.importorskip("accelerate")
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from transformers import PreTrainedTokenizerFast

    from fixedcode_study.evaluation.harness import build_record
    from fixedcode_study.systems.hf import to_hf_llama

    ckpt = untrained_checkpoint("binary16", max_seq_len=128, randomised=True)
    tasks = list(PAPER_METRICS)
    ours = evaluate_checkpoint(ckpt, compose_eval_config(["eval=paper", "eval.limit=3", f"eval.data_dir={SHARED_EVAL}"]),
                               write=False)
    lm = FixedCodeLM(checkpoint=ckpt)
    hflm = HFLM(pretrained=to_hf_llama(lm.model), batch_size=32, device="cpu",
                tokenizer=PreTrainedTokenizerFast(tokenizer_object=lm.tokenizer, eos_token="<|endoftext|>"))
    folder = write_tasks(tasks, tmp_path / "tasks", data_dir=SHARED_EVAL)
    theirs = build_record(lm_eval.simple_evaluate(
        model=hflm, tasks=tasks, task_manager=TaskManager(include_path=str(folder.include_path), include_defaults=False),
        num_fewshot=0, limit=3, bootstrap_iters=1000, log_samples=False,
    ), EvalSpec.of({**ours["settings"], "name": "paper", "tasks": tasks, "metrics": PAPER_METRICS}))
    for task in tasks:
        for metric, value in ours["tasks"][task].items():
            if value is not None and not metric.endswith("_stderr"):
                assert value == pytest.approx(theirs["tasks"][task][metric], rel=1e-4), (task, metric)
