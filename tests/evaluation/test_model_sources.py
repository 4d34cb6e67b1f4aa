"""Every command reads every form of a model we ship (hub/source.py's one rule), offline.

A job directory, its checkpoints/final folder and one of our exports (whose source checkpoint is
here) are read alike by generate, export, evaluate, probe and lm-eval's own command line; `generate
hf=` reads an export as transformers' folder; an export copied away from its source, or whose source
was retrained, is refused in one line naming the fix. lm-eval's command line works on the sweep's
folder names, which hold commas (`input=gf2,seed=1`). `eval-tasks` refuses unknown task names.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

pytest.importorskip("transformers")

from helpers.eval import trained_checkpoint  # noqa: E402

from fixedcode_study.cli.__main__ import main as fixedcode  # noqa: E402
from fixedcode_study.evaluation.tasks import write_tasks  # noqa: E402
from fixedcode_study.evaluation.tasks.builtin import BUILTIN_TASKS, HELDOUT_PPL  # noqa: E402
from fixedcode_study.evaluation.tasks.mirror import MIRROR_TASKS  # noqa: E402
from fixedcode_study.hub.export import export_checkpoint  # noqa: E402

GENERATE = ["prompt=KING HENRY:", "n=2", "max_new_tokens=10", "seed=3"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A trained gf2 job copied into a sweep-named folder (`input=gf2,seed=1`), and its export."""
    ckpt, prepared = trained_checkpoint("gf2")
    root = tmp_path_factory.mktemp("shipped")
    job = root / "study" / "input=gf2,seed=1"
    shutil.copytree(ckpt.parent.parent, job, ignore=shutil.ignore_patterns("wandb", "last.ckpt*"))
    export = export_checkpoint(job / "checkpoints" / "final", root / "exports" / "gf2-s1").path
    return job, export, prepared


def one_error_line(capfd) -> str:
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def samples(capfd) -> list[str]:
    """The printed samples, without the `=== <folder>` header line."""
    return [line for line in capfd.readouterr().out.splitlines() if not line.startswith(("===", "[generate]"))]


def orphan_export(shipped, tmp_path):
    """The export as it arrives on another machine: its metadata names a source that is not here."""
    _, export, _ = shipped
    copy = tmp_path / "downloaded"
    shutil.copytree(export, copy)
    config = json.loads((copy / "config.json").read_text())
    config["fixedcode_export"]["checkpoint"] = str(tmp_path / "elsewhere" / "checkpoints" / "final")
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def test_generate_reads_the_job_its_final_folder_and_its_export_alike(shipped, capfd):
    job, export, _ = shipped
    printed = []
    for source in (f"checkpoint={job}", f"checkpoint={job / 'checkpoints' / 'final'}",
                   f"checkpoint={export}", f"hf={export}"):
        assert fixedcode(["generate", source, *GENERATE]) == 0, source
        printed.append(samples(capfd))
    assert printed[0][0].startswith("--- sample 1") and sum(line.startswith("--- sample") for line in printed[0]) == 2
    assert all(p == printed[0] for p in printed), printed


def test_an_export_away_from_its_source_is_refused_in_one_line_naming_the_fix(shipped, tmp_path, capfd):
    orphan = orphan_export(shipped, tmp_path)
    for verb, args, fix in (("generate", GENERATE, f"pass hf={orphan}"),
                            ("export", [f"out={tmp_path / 'again'}"], "export the job directory"),
                            ("evaluate", ["eval=builtin"], f"pass hf={orphan}")):
        assert fixedcode([verb, f"checkpoint={orphan}", *args]) == 2, verb
        line = one_error_line(capfd)
        assert line.startswith("error: checkpoint: ") and "is not here" in line and fix in line, line
    assert not (tmp_path / "again").exists()
    assert fixedcode(["generate", f"hf={orphan}", *GENERATE]) == 0  # the folder itself still samples
    assert samples(capfd)[0].startswith("--- sample 1")


def test_an_export_whose_source_was_retrained_is_refused(shipped, tmp_path, capfd):
    job, _, _ = shipped
    other = tmp_path / "input=gf2,seed=1"
    shutil.copytree(job, other)
    export = export_checkpoint(other, tmp_path / "export").path  # the job directory, through the old rule
    weights = other / "checkpoints" / "final" / "model.safetensors"
    state = load_file(str(weights))
    state["head.weight"] = state["head.weight"] * 1.5  # as if the job had been trained again since
    save_file(state, str(weights), metadata={"format_version": "1"})
    assert fixedcode(["generate", f"checkpoint={export}", *GENERATE]) == 2
    line = one_error_line(capfd)
    assert line.startswith("error: checkpoint: ") and "holds another model now" in line and "hf=" in line


def test_export_takes_an_export_and_writes_the_same_weights_again(shipped, tmp_path, capfd):
    _, export, _ = shipped
    assert fixedcode(["export", f"checkpoint={export}", f"out={tmp_path / 'again'}"]) == 0
    assert "logits equal the workbench model's" in capfd.readouterr().out
    first, again = load_file(str(export / "model.safetensors")), load_file(str(tmp_path / "again" / "model.safetensors"))
    assert set(first) == set(again) and all(torch.equal(first[k], again[k]) for k in first)
    meta = json.loads((tmp_path / "again" / "config.json").read_text())["fixedcode_export"]
    assert meta["checkpoint"] == json.loads((export / "config.json").read_text())["fixedcode_export"]["checkpoint"]


def test_evaluate_takes_a_job_directory_and_an_export(shipped, tmp_path, capfd):
    job, export, prepared = shipped
    records = []
    for i, source in enumerate((job, export)):
        out = tmp_path / f"eval-{i}.json"
        assert fixedcode(["evaluate", f"checkpoint={source}", "eval=builtin", f"eval.tasks=[{HELDOUT_PPL}]",
                          "eval.limit=3", "eval.bootstrap_iters=0", f"eval.prepared_root={prepared}",
                          f"eval.output={out}"]) == 0, capfd.readouterr().err[-2000:]
        records.append(json.loads(out.read_text()))
    final = str((job / "checkpoints" / "final").resolve())
    assert records[0]["checkpoint"] == records[1]["checkpoint"] == final
    assert records[0]["tasks"] == records[1]["tasks"] and records[0]["tasks"][HELDOUT_PPL]["bits_per_byte"] > 0


def test_probe_takes_an_export_of_a_job(shipped, capfd):
    job, export, _ = shipped
    assert fixedcode(["probe", f"checkpoint={export}", "probe.tokens=1024", "probe.classes=32", "probe.type_vectors=32",
                      "probe.type_min_count=2", "probe.init=false", "probe.snapshots=false", "probe.cross=false"]) == 0, \
        capfd.readouterr().err[-2000:]
    record = json.loads((job / "probes.json").read_text())
    assert [m["label"] for m in record["models"]] == ["final"]


def test_lm_evals_own_parser_reads_a_sweep_folder_name_whole(shipped, monkeypatch):
    """What lm-eval's own argument parser (the one its cli_evaluate runs) makes of the command line
    once ours has prepared it."""
    from lm_eval._cli import HarnessCLI

    from fixedcode_study.cli.lm_eval_model import resolve_model_args

    job, _, _ = shipped
    final = job / "checkpoints" / "final"
    for given in (final, job):
        argv = resolve_model_args(["--model", "fixedcode", "--model_args", f"checkpoint={given},batch_size=4",
                                   "--tasks", HELDOUT_PPL])
        monkeypatch.setattr(sys, "argv", ["lm-eval", *argv])
        parsed = HarnessCLI().parse_args().model_args
        assert parsed == {"checkpoint": str(final), "batch_size": 4}, parsed


@pytest.mark.slow  # lm-eval's CLI builds its whole task index first
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_the_readme_lm_eval_line_works_on_a_sweep_folder_name_with_a_comma(shipped, tmp_path, monkeypatch, capsys):
    """`fixedcode lm-eval --model fixedcode --model_args checkpoint=DIR ...` as written, DIR a job of
    the sweep (in-process: `python -m fixedcode_study lm-eval` through runpy, exactly as `-m` runs it)."""
    job, _, prepared = shipped
    assert "," in job.name
    folder = write_tasks([HELDOUT_PPL], tmp_path / "tasks", prepared_root=prepared)
    monkeypatch.setattr(sys, "argv", [
        "fixedcode_study", "lm-eval", "--model", "fixedcode", "--model_args", f"checkpoint={job / 'checkpoints' / 'final'}",
        "--tasks", HELDOUT_PPL, "--include_path", str(folder.include_path), "--limit", "2", "--batch_size", "4",
        "--device", "cpu", "--output_path", str(tmp_path / "out"),
    ])
    runpy.run_module("fixedcode_study", run_name="__main__")
    assert "word_perplexity" in capsys.readouterr().out
    saved = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert saved["config"]["checkpoint"] == str((job / "checkpoints" / "final").resolve())


def test_the_lm_eval_model_given_an_export_directly_names_what_to_pass(shipped):
    """FixedCodeLM(checkpoint=EXPORT) from Python, where no command maps the export to its source:
    one line saying what the folder is and what to pass (it said "format_version None")."""
    from fixedcode_study.errors import ConfigError
    from fixedcode_study.evaluation.lm import FixedCodeLM

    _, export, _ = shipped
    with pytest.raises(ConfigError) as refused:
        FixedCodeLM(checkpoint=str(export))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("checkpoint: ") and "Hugging Face export" in message
    assert "exported from" in message and "trust_remote_code=True" in message


def drop_handlers_on_closed_streams() -> None:
    """lm-eval's CLI adds a StreamHandler on the sys.stderr of its call; in pytest that is an earlier
    test's capture stream, closed since, and writing to it prints '--- Logging error --- Traceback'.
    A user's process runs the CLI once, so only the test process has such handlers."""
    import logging

    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]:
        for handler in list(logger.handlers):
            if getattr(getattr(handler, "stream", None), "closed", False):
                logger.removeHandler(handler)


@pytest.mark.slow  # lm-eval's CLI builds its whole task index before it can say a task is unknown
def test_an_unknown_task_on_lm_evals_command_line_is_one_line_and_exit_2(shipped, monkeypatch, capsys):
    """lm-eval reports its own argument checks as a bare ValueError (a traceback, exit 1); ours say
    them in one line with exit 2, as every command does. Other ValueErrors keep their traceback."""
    from fixedcode_study.cli.lm_eval_model import main

    drop_handlers_on_closed_streams()
    job, _, _ = shipped
    assert main(["--model", "fixedcode", "--model_args", f"checkpoint={job}", "--tasks", "hellaswagg",
                 "--limit", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("error: fixedcode lm-eval: Tasks not found: hellaswagg; "
                       "`fixedcode lm-eval ls tasks` lists the tasks"), err
    assert not any("Traceback" in line for line in err), "\n".join(err)


@pytest.mark.slow
def test_a_missing_include_path_is_one_line_before_lm_eval_looks_on_the_hub(tmp_path, capsys):
    """lm-eval skips a missing --include_path folder and fetches the task from the Hub instead: offline,
    the manual's own example ended in a ConnectionError traceback when eval-tasks had not made tasks/."""
    from fixedcode_study.cli.lm_eval_model import main

    missing = tmp_path / "tasks"
    assert main(["--model", "fixedcode", "--model_args", f"checkpoint={tmp_path / 'job'}", "--include_path",
                 str(missing), "--tasks", "hellaswag"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err == (f"error: --include_path: {missing} is not a folder; make the task YAMLs first: "
                   "fixedcode eval-tasks OUT_DIR tasks=... (its --help)")
    missing.mkdir()  # there: lm-eval gets the line (and here stops at the checkpoint that is not)
    assert main(["--model", "fixedcode", "--model_args", f"checkpoint={tmp_path / 'job'}",
                 f"--include_path={missing}", "--tasks", "hellaswag"]) == 2
    assert "--include_path" not in capsys.readouterr().err


def test_lm_evals_python_api_takes_a_model_args_string_with_a_comma_in_the_path(shipped, tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    job, _, prepared = shipped
    folder = write_tasks([HELDOUT_PPL], tmp_path / "tasks", prepared_root=prepared)
    manager = TaskManager(include_path=str(folder.include_path), include_defaults=False)
    results = lm_eval.simple_evaluate(model="fixedcode", model_args=f"checkpoint={job},batch_size=4,device=cpu",
                                      tasks=[HELDOUT_PPL], task_manager=manager, limit=2, bootstrap_iters=0)
    assert results["config"]["checkpoint"] == str((job / "checkpoints" / "final").resolve())
    assert results["results"][HELDOUT_PPL]["word_perplexity,none"] > 1


def test_lm_eval_refuses_an_orphan_export_in_one_line(shipped, tmp_path, capfd):
    orphan = orphan_export(shipped, tmp_path)
    code = fixedcode(["lm-eval", "--model", "fixedcode", "--model_args", f"checkpoint={orphan}", "--tasks", HELDOUT_PPL])
    assert code == 2
    line = one_error_line(capfd)
    assert line.startswith("error: checkpoint: ") and "--model hf --model_args pretrained=" in line, line


# --- eval-tasks --------------------------------------------------------------------------------

def test_eval_tasks_refuses_an_unknown_task_naming_the_known_ones(tmp_path, capfd):
    assert fixedcode(["eval-tasks", str(tmp_path / "tasks"), "tasks=nosuchtask"]) == 2
    line = one_error_line(capfd)
    assert line.startswith("error: tasks: nosuchtask is not a task")
    assert all(name in line for name in (*BUILTIN_TASKS, *MIRROR_TASKS)), line
    assert not (tmp_path / "tasks").exists()  # refused before anything is written


@pytest.mark.slow
def test_every_name_lm_evals_index_knows_is_spelled_in_its_tasks_folder():
    """The premise of unknown_tasks' quick answer (a name no file spells is no task), on the lm-eval
    installed here (building the index makes this test slow). A name that is one of the texts' words
    is spelled there; only the few others (names with brackets) are looked for in the whole text."""
    from lm_eval.tasks import TaskManager

    from fixedcode_study.evaluation.tasks import official_task_texts, unknown_tasks

    spelled = "\n".join(official_task_texts())
    words = set(re.findall(r"[\w.-]+", spelled))  # each a substring of `spelled`
    assert not [name for name in TaskManager().all_tasks if name not in words and name not in spelled]
    assert unknown_tasks(["arc_challenge", "nosuchtask", "piqa"]) == ["nosuchtask"]  # lm-eval's own, unknown, mirrored


def test_eval_tasks_offline_without_a_mirror_is_refused_not_an_empty_folder(tmp_path, capfd, monkeypatch):
    """Offline, a task with no mirror would be left to lm-eval's Hub copy: it wrote 0 files and exited 0."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fixedcode(["eval-tasks", str(tmp_path / "tasks"), "tasks=hellaswag"]) == 2
    line = one_error_line(capfd)
    assert line.startswith("error: data_dir: hellaswag would be read from the Hugging Face Hub"), line
    assert not (tmp_path / "tasks").exists()


def test_eval_tasks_names_the_option_a_built_in_task_needs(tmp_path, capfd):
    assert fixedcode(["eval-tasks", str(tmp_path / "tasks"), f"tasks={HELDOUT_PPL}"]) == 2
    line = one_error_line(capfd)
    assert line.startswith("error: prepared_root: ") and "PreparedData" not in line, line


def test_eval_tasks_help_lists_the_task_names_and_keeps_its_examples_whole(capfd):
    assert fixedcode(["eval-tasks", "--help"]) == 0
    out = capfd.readouterr().out
    assert all(name in out for name in (*BUILTIN_TASKS, *MIRROR_TASKS)), out
    lines = out.splitlines()
    assert any(line.strip().startswith("fixedcode eval-tasks OUT_DIR tasks=fixedcode_heldout_ppl prepared_root=")
               for line in lines), out
    assert "evaluation/tasks.py" not in out  # a module that no longer exists
