"""The systems benchmark: one quick smoke run of the CLI, plus the accounting it reports.

Speed targets are not asserted here (timings on a shared CI box are noise); the benchmark prints
them. These tests check that every reported number exists, is positive and is computed right, and
that the timed step is the one `run` takes (Trainer.fit of LanguageModelTask, its optimizer groups).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from fixedcode_study import accounting
from fixedcode_study.accounting import flops_per_token, matmul_params, parameter_groups
from fixedcode_study.build import build_decoder
from fixedcode_study.cli.bench import main as bench_main
from fixedcode_study.cli.bench import variant_specs
from fixedcode_study.cli.bench_input import input_specs
from fixedcode_study.model import ModelConfig
from fixedcode_study.systems.bench_input import InputBenchOptions, run_input_bench
from fixedcode_study.systems.bench_report import compare_with_reference, state_only
from fixedcode_study.systems.fit import REFERENCE, SETTINGS, STEP, build_subject_model, compile_subject, fit_steps
from fixedcode_study.systems.timing import pass_plan, subjects
from fixedcode_study.training.task import LanguageModelTask

PAPER_TABLE = 49_152 * 2_048


def _bench(out_dir, *args: str, timeout: float = 600) -> tuple[dict, str]:
    """(report, stdout) of `fixedcode bench` run in a process of its own (the memory meter retunes
    malloc for the rest of a process)."""
    out = out_dir / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study", "bench", *args, f"json={out}"],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text()), proc.stdout


@pytest.fixture(scope="module")
def default_bench(tmp_path_factory) -> tuple[dict, str]:
    """`fixedcode bench` at its defaults (settings, inputs, schedule, the reference, one job) on
    test_micro: read by the smoke test and by the side-by-side test of one setting. (Jobs side by side
    are the two-precision report's: the same fp32 learned job, x2, and bf16's.)"""
    pytest.importorskip("transformers")
    return _bench(tmp_path_factory.mktemp("default_bench"), "model=test_micro", "train.batch_size=4", "steps=2",
                  "warmup=1", "memory_steps=1", "threads=1")


@pytest.fixture(scope="module")
def compiled_default_bench(tmp_path_factory) -> tuple[dict, str]:
    """`fixedcode bench` at its defaults where the job `run` would train is compiled, as cpu_tiny's is:
    test_micro is under train.compile_min_flops, so train.compile=true makes its default resolve the
    way cpu_tiny's does (inputs=learned only: each compiled fit compiles afresh, and the fixed inputs
    add nothing to what is tested). The fewest compiles that show it: one block (every block compiles
    to the same kernels), one timed step after the warm-up one (one pass: the abba split is the
    eager smoke test's), so each model compiles twice, for its timed fit and its memory fit. Read by
    the two compiled tests."""
    pytest.importorskip("transformers")
    return _bench(tmp_path_factory.mktemp("compiled_default_bench"), "model=test_micro", "model.n_layer=1",
                  "train.compile=true", "inputs=learned", "train.batch_size=4", "steps=1", "warmup=1",
                  "memory_steps=1", "threads=1")


@pytest.mark.slow
def test_bench_cli_smoke(default_bench):
    report, stdout = default_bench
    assert "vs HF" in stdout and "hf_llama" in stdout
    for key in ("peak_flops", "flops_per_token", "tokens_per_step"):
        assert report[key] > 0, key
    # The default setting is what `run` uses: test_micro trains in fp32 on CPU (too narrow for bf16 to
    # win, training/speed.py) and a test-sized job is not compiled.
    assert report["model"] == "test_micro" and report["precision"] == "32-true"
    assert report["settings"] == [{"name": "fp32", "precision": "32-true", "compile": False, "input_eager": True}]
    mcfg = ModelConfig(**report["architecture"])
    assert report["flops_per_token"] == flops_per_token(mcfg, report["seq_len"])["total"]
    assert report["flops_formula"] == accounting.FLOPS_FORMULA and report["step"] == STEP
    # ABBA: the 2 timed steps split over a pass in order and a reversed pass.
    assert [p["timed_steps"] for p in report["passes"]] == [1, 1]
    assert report["passes"][1]["order"] == report["passes"][0]["order"][::-1]
    rows = {v["name"]: v for v in report["variants"]}
    assert set(rows) == {"learned", "binary16", "gf2", REFERENCE}
    for name, v in rows.items():  # every model, the reference too, trained through the task `run` uses
        assert v["lightning_module"] == "fixedcode_study.training.task.LanguageModelTask", name
        assert sum(v["optimizer_groups"].values()) == v["trainable_params"], name
    # The reference's embedding and head land in the input and head groups, as ours do.
    assert rows[REFERENCE]["optimizer_groups"] == rows["learned"]["optimizer_groups"]
    assert rows["learned"]["optimizer_groups"]["input"] == 512 * 64
    assert list(rows["binary16"]["optimizer_groups"]) == ["head", "decay", "no_decay"]
    for name, v in rows.items():
        for key in ("step_ms_median", "step_cpu_ms_median", "tokens_per_s", "mfu", "peak_memory_bytes",
                    "trainable_params", "tokens_per_s_vs_reference"):
            assert v[key] > 0, (name, key)
        for key in ("param_bytes", "grad_bytes", "optimizer_state_bytes", "total_bytes"):
            assert v["state"][key] > 0, (name, key)
        assert v["checkpoint"]["weights_bytes"] > 0 and v["checkpoint"]["total_bytes"] > 0, name
        # AdamW holds exactly two fp32 moments per trainable parameter (+ a step counter each).
        assert 8 * v["trainable_params"] <= v["state"]["optimizer_state_bytes"] <= 8 * v["trainable_params"] + 4096
    # The reference is converted from our learned model: same weights, same batch, same first loss.
    assert rows["learned"]["first_loss"] == pytest.approx(rows[REFERENCE]["first_loss"], abs=1e-4)
    # The fixed codes hold no input table: less state and a smaller checkpoint than the learned input.
    table = 512 * 64
    assert rows["learned"]["trainable_params"] - rows["binary16"]["trainable_params"] == table
    saved = rows["learned"]["state"]["optimizer_state_bytes"] - rows["binary16"]["state"]["optimizer_state_bytes"]
    assert 8 * table <= saved <= 8 * table + 8  # two moments (+ the table's step counter)
    assert rows["binary16"]["checkpoint"]["weights_bytes"] < rows["learned"]["checkpoint"]["weights_bytes"] - 4 * table + 4096
    assert set(report["state_accounting"]) == {"learned", "binary16", "gf2"}


@pytest.mark.slow
def test_default_bench_compiled_measures_the_reference(compiled_default_bench):
    """`fixedcode bench` at its defaults (settings=default, schedule, the HF reference) where the job
    `run` would train is compiled (the fixture says how). It stopped with AttributeError:
    'HFCausalLM' object has no attribute 'input' (issue 45)."""
    report, stdout = compiled_default_bench
    assert report["settings"] == [{"name": "fp32_compiled", "precision": "32-true", "compile": True,
                                   "input_eager": True}]
    rows = {v["name"]: v for v in report["variants"]}
    assert set(rows) == {"learned", REFERENCE}
    ref = rows[REFERENCE]
    assert ref["kind"] == "reference" and ref["compiled"]
    for key in ("step_ms_median", "tokens_per_s", "mfu", "compile_s", "peak_memory_bytes"):
        assert ref[key] > 0, key
    assert ref["tokens_per_s_vs_reference"] == pytest.approx(1.0)
    for name, v in rows.items():  # every row is set against the measured reference
        assert v["reference_row"] == REFERENCE, name
        assert v["tokens_per_s_vs_reference"] == pytest.approx(v["tokens_per_s"] / ref["tokens_per_s"]), name
    assert rows["learned"]["first_loss"] == pytest.approx(ref["first_loss"], abs=1e-4)  # same weights
    table = next(line for line in stdout.splitlines() if line.startswith(REFERENCE))
    assert table.split()[3] == "1.00x"  # its row is printed, vs HF column included


@pytest.mark.parametrize("setting", ["fp32_compiled", "fp32_compiled_input"])
def test_compile_subject_by_model(setting):
    """Compiled, our Decoder keeps its input layer eager (unless a _input setting) and the reference
    is torch.compile of the whole LlamaForCausalLM, as HF users compile it (nn.Module.compile is lazy:
    nothing is compiled here, only what would be)."""
    pytest.importorskip("transformers")
    spec = variant_specs(["model=test_micro"], ["learned"])["learned"]
    ours, _ = build_subject_model("learned", spec, torch.device("cpu"))
    compile_subject(ours, SETTINGS[setting])
    assert ours._compiled_call_impl is not None
    eager_input = getattr(ours.input.forward, "_torchdynamo_disable", False)
    assert eager_input == SETTINGS[setting].input_eager
    ref, _ = build_subject_model(REFERENCE, spec, torch.device("cpu"))
    compile_subject(ref, SETTINGS[setting])  # was AttributeError: 'HFCausalLM' object has no attribute 'input'
    assert ref.hf._compiled_call_impl is not None  # the HF model itself, whole
    assert ref._compiled_call_impl is None  # not our adapter around it


def test_reference_runs_once_per_precision_and_compile():
    """A _input setting differs from its plain twin only in our input layer: the reference (compiled
    whole either way) is timed once for both, and rows of either setting are set against it."""
    chosen = [SETTINGS[n] for n in ("fp32_compiled", "fp32_compiled_input", "fp32")]
    rows = subjects({"learned": "learned spec"}, "reference spec", chosen)
    assert [r.key for r in rows] == ["learned@fp32_compiled", f"{REFERENCE}@fp32_compiled",
                                     "learned@fp32_compiled_input", "learned@fp32", f"{REFERENCE}@fp32"]
    variants = [{"name": r.key, "setting": r.setting.name, "precision": r.setting.precision,
                 "compiled": r.setting.compile, "kind": "reference" if r.name == REFERENCE else "ours",
                 "tokens_per_s": tps} for r, tps in zip(rows, (300.0, 200.0, 250.0, 100.0, 50.0))]
    compare_with_reference(variants, [])
    by = {v["name"]: v for v in variants}
    assert by["learned@fp32_compiled_input"]["tokens_per_s_vs_reference_same_setting"] == pytest.approx(250 / 200)
    assert by["learned@fp32"]["tokens_per_s_vs_reference_same_setting"] == pytest.approx(100 / 50)
    assert all(v["reference_row"] == f"{REFERENCE}@fp32_compiled" for v in variants)


@pytest.mark.slow
def test_bench_rows_use_their_own_models_flops(precisions_bench):
    """A size-matched body costs more FLOPs per token than the preset: its row's FLOPs and MFU come
    from the model actually built for it, not from the first variant's preset (in either precision;
    the two-precision report below, whose inputs are learned and binary16_sizematched)."""
    report = precisions_bench
    rows = {v["name"]: v for v in report["variants"]}
    built = {}
    for name, spec in variant_specs(list(PRECISIONS_OVERRIDES), ["learned", "binary16_sizematched"]).items():
        with torch.device("meta"):
            built[name] = flops_per_token(build_decoder(spec.model).config, report["seq_len"])["total"]
    built[REFERENCE] = built["learned"]  # converted from the learned model: the preset's
    assert built["binary16_sizematched"] > built["learned"] == report["flops_per_token"]  # the preset's
    assert {v["model_name"] for v in rows.values()} == set(built)
    for name, v in rows.items():
        assert v["flops_per_token"] == built[v["model_name"]], name
        assert v["mfu"] == pytest.approx(v["tokens_per_s"] * built[v["model_name"]] / v["peak_flops"]), name


def test_bench_rejects_unknown_option(capsys):
    code = bench_main(["model=test_micro", "--stepz", "3"])  # main returns the exit status
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --stepz:") and "not an option" in err and "\n" not in err


def test_bench_mistyped_setting_is_one_line_naming_it(capsys):
    """A key=value that is not a setting goes to Hydra as an override; a near-miss of a setting says so."""
    assert bench_main(["model=test_micro", "stpes=2"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: overrides: Could not override 'stpes'") and "did you mean steps=?" in err


def test_a_cpu_bench_whose_training_state_outgrows_memory_stops_in_one_line(capsys):
    """bench.py's manual says `model=paper_1p7b train.batch_size=4 train.seq_len=2048` is for a GPU; on a
    CPU box it was killed by the kernel minutes in. Its AdamW state alone is 27 GiB: refused up front."""
    from fixedcode_study.systems.bench import _available_memory_bytes, require_memory_for_state

    specs = variant_specs(["model=paper_1p7b", "train.batch_size=4", "train.seq_len=2048"], ["learned"])
    needed = state_only(specs)["learned"]["total_bytes"]
    require_memory_for_state(variant_specs(["model=test_micro"], ["learned", "gf2"]), jobs=2)  # fits: silent
    available = _available_memory_bytes()
    if available is None or available >= needed:
        pytest.skip(f"this machine has {available} bytes available, enough for {needed}")
    assert bench_main(["model=paper_1p7b", "train.batch_size=4", "train.seq_len=2048", "device=cpu"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: model: paper_1p7b: the AdamW training state of input=learned alone is 27.0 GiB")
    assert "state_only=true" in err


def test_flops_count_matches_the_parameters():
    spec = variant_specs(["model=test_micro"], ["learned"])["learned"]
    model = build_decoder(spec.model)
    mcfg = model.config
    groups = parameter_groups(model)
    norms = (2 * mcfg.n_layer + 1) * mcfg.d_model
    assert matmul_params(mcfg) == groups["body"] + groups["head"] - norms
    # Hand count for test_micro (V=512, L=2, d=64, H=4, d_ff=128) at T=64.
    per_layer = 64 * 3 * 64 + 64 * 64 + 3 * 64 * 128
    assert flops_per_token(mcfg, 64)["total"] == 6 * (2 * per_layer + 64 * 512) + 12 * 2 * 4 * 16 * 64
    gqa = ModelConfig(**{**mcfg.to_dict(), "n_kv_head": 1})
    assert matmul_params(gqa) < matmul_params(mcfg)


def test_paper_state_accounting_from_meta_build():
    acc = state_only(variant_specs(["model=paper_1p7b"], ["learned", "binary16", "gf2"]))
    assert acc["learned"]["trainable_params"] == 1_812_039_680
    assert acc["binary16"]["trainable_params"] == 1_711_376_384
    assert acc["learned"]["groups"]["input"]["params"] == PAPER_TABLE
    assert "input" not in acc["binary16"]["groups"]
    # Buffers (rotary tables, code constants) are counted apart from the 16 bytes per trainable weight.
    assert acc["learned"]["total_bytes"] - acc["learned"]["buffer_bytes"] == 16 * 1_812_039_680
    # fp32 weight + grad + 2 AdamW moments per table entry: 16 bytes x 100,663,296 = 1.5 GiB.
    weights_saved = acc["learned"]["trainable_param_bytes"] - acc["binary16"]["trainable_param_bytes"]
    assert 4 * weights_saved == 16 * PAPER_TABLE
    assert abs(acc["binary16"]["saving_vs_learned_bytes"] - 16 * PAPER_TABLE) < 1024  # less the code's buffers
    # gf2 keeps its 16 x 16 matrix and shift as persistent fp32 buffers: a few hundred bytes.
    assert acc["gf2"]["buffer_bytes"] - acc["binary16"]["buffer_bytes"] == 4 * (16 * 16 + 16)


def test_input_bench_small_width():
    rep = run_input_bench(input_specs([], ["learned", "binary16", "gf2"]),
                          InputBenchOptions(vocab_size=512, d_model=64, batch=2, seq=16, repeats=2, device="cpu",
                                            prototypes=True), log=lambda s: None)
    rows = {r["name"]: r for r in rep["rows"]}
    assert rows["learned"]["backward_ms"] > 0 and rows["learned"]["optimizer_ms"] > 0
    assert rows["learned"]["trainable_params"] == 512 * 64
    for name in ("binary16", "gf2"):
        assert rows[name]["forward_ms"] > 0
        assert rows[name]["trainable_params"] == 0 and rows[name]["optimizer_ms"] < rows["learned"]["optimizer_ms"]
    assert any(":" in name for name in rows)  # prototypes ran (and matched the modules exactly)


@pytest.mark.slow
def test_peak_memory_meter_sees_an_allocation():
    code = textwrap.dedent("""
        import torch
        from fixedcode_study.systems.meters import PeakMemory
        meter = PeakMemory(torch.device("cpu"))
        meter.start()
        x = torch.ones(16 * 2**20)  # 64 MiB, touched
        del x
        small = meter.peak()
        meter.start()
        print(small, meter.peak())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    seen, after_reset = map(int, proc.stdout.split())
    assert seen >= 60 * 2**20
    assert after_reset < 16 * 2**20  # freed memory went back to the OS, so the next baseline is clean


def test_abba_pass_plan():
    names = ["learned", "binary16", "gf2", REFERENCE]
    assert pass_plan(names, 5, "abba") == [(names, 3), (names[::-1], 2)]
    assert pass_plan(names, 5, "sequential") == [(names, 5)]


def _group_ids(groups):
    return {g["name"]: [id(p) for p in g["params"]] for g in groups}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["learned", REFERENCE])
def test_timed_step_runs_through_language_model_task(name, tmp_path):
    """The bench's timed steps are Trainer.fit steps of LanguageModelTask: its optimizer holds
    exactly the groups LanguageModelTask.param_groups() builds (accounting.optimizer_groups), for
    our model and for the HF adapter alike, and every trainable parameter is in exactly one group."""
    if name == REFERENCE:
        pytest.importorskip("transformers")
    spec = variant_specs(["model=test_micro"], ["learned"])["learned"]
    batch = torch.randint(0, 512, (2, 17), generator=torch.Generator().manual_seed(0))  # (B, T+1)
    fit = fit_steps(name, spec, torch.device("cpu"), batch, 2, tmp_path)
    rec, task, model = fit.record, fit.task, fit.task.model
    assert rec.module_type is LanguageModelTask and isinstance(task, LanguageModelTask)
    assert len(rec.wall) == len(rec.cpu) == 2 and all(t > 0 for t in rec.wall)
    assert rec.first_loss == pytest.approx(6.24, abs=0.1)  # ~ln(512) at init
    groups = task.param_groups()
    assert [g["name"] for g in groups] == list(rec.optimizer_groups) == ["input", "head", "decay", "no_decay"]
    assert rec.optimizer_param_ids == _group_ids(groups)  # the very tensors, not just the same counts
    # accounting.optimizer_groups covers every trainable parameter exactly once.
    ids = [id(p) for g in accounting.optimizer_groups(model, spec.optim.groups_settings()) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)
    assert len(ids) == len(set(ids))
    named = dict(model.named_parameters())
    table, head = (("hf.model.embed_tokens.weight", "hf.lm_head.weight") if name == REFERENCE
                   else ("input.table.weight", "head.weight"))
    assert rec.optimizer_param_ids["input"] == [id(named[table])]
    assert rec.optimizer_param_ids["head"] == [id(named[head])]


PRECISIONS_OVERRIDES = ("model=test_micro", "train.batch_size=4")


@pytest.fixture(scope="module")
def precisions_bench(tmp_path_factory) -> dict:
    """fp32 and bf16 side by side, two jobs each, for the learned input and a size-matched body (whose
    own FLOPs its rows must use): eager settings only, one step per fit (no warm-up, so one pass) and
    per side-by-side job. Read by the two-precision test and the FLOPs-per-row test."""
    pytest.importorskip("transformers")
    report, _ = _bench(tmp_path_factory.mktemp("precisions_bench"), *PRECISIONS_OVERRIDES,
                       "inputs=learned,binary16_sizematched", "settings=fp32,bf16", "jobs=2", "steps=1", "warmup=0",
                       "memory_steps=1", "threads=1")
    return report


def _check_settings_rows(report: dict, settings: list[str], models: tuple[str, ...], jobs: int) -> dict:
    rows = {v["name"]: v for v in report["variants"]}
    suffixes = [f"@{s}" for s in settings] if len(settings) > 1 else [""]  # one setting: plain names
    assert set(rows) == {name + sfx for sfx in suffixes for name in models}
    refs = [v for v in rows.values() if v["kind"] == "reference"]
    fastest = max(refs, key=lambda v: v["tokens_per_s"])
    for v in rows.values():
        peak = report["peaks"]["torch.bfloat16" if v["precision"] == "bf16-mixed" else "torch.float32"]["flops"]
        assert v["peak_flops"] == peak and v["mfu"] == pytest.approx(v["tokens_per_s"] * v["flops_per_token"] / peak)
        assert v["reference_row"] == fastest["name"]
        assert v["tokens_per_s_vs_reference"] == pytest.approx(v["tokens_per_s"] / fastest["tokens_per_s"])
        assert v["compile_s"] == 0.0  # eager settings compile nothing
    side = {v["setting"]: v for v in report["side_by_side"]}
    assert set(side) == (set(settings) if jobs > 1 else set())  # one job: no aggregate rows
    for v in side.values():  # two jobs, each with its own median step; the row is their sum
        assert v["jobs"] == jobs and len(v["per_job_step_ms_median"]) == jobs
        assert v["tokens_per_s"] == pytest.approx(sum(4 * 64 * 1e3 / ms for ms in v["per_job_step_ms_median"]))
    return rows


@pytest.mark.slow
def test_bench_settings_side_by_side(default_bench):
    """A setting side by side with the reference: its MFU is over that precision's measured peak, every
    row is compared with the fastest reference row, and one job adds no aggregate row. (One setting,
    fp32, test_micro's default: the smoke test's run; the slow test below runs both precisions, and
    --jobs=2's aggregate rows of each.)"""
    report, _ = default_bench
    assert [s["name"] for s in report["settings"]] == ["fp32"]
    assert set(report["peaks"]) == {"torch.float32"}
    _check_settings_rows(report, ["fp32"], models=("learned", "binary16", "gf2", "hf_llama"), jobs=1)


@pytest.mark.slow
def test_bench_settings_side_by_side_in_both_precisions(precisions_bench):
    """fp32 and bf16 rows in one report, each against its own peak; the first loss agrees across precisions."""
    report = precisions_bench
    assert set(report["peaks"]) == {"torch.float32", "torch.bfloat16"}
    rows = _check_settings_rows(report, ["fp32", "bf16"], models=("learned", "binary16_sizematched", "hf_llama"),
                                jobs=2)
    # Same weights, same batch: the first loss agrees across precisions to bf16 rounding.
    assert rows["learned@bf16"]["first_loss"] == pytest.approx(rows["learned@fp32"]["first_loss"], abs=2e-2)


@pytest.mark.slow
def test_bench_compiled_setting_reports_compile_time(compiled_default_bench):
    """The fp32_compiled setting (the compiled default's) reports each row's compile time."""
    report, _ = compiled_default_bench
    assert [s["name"] for s in report["settings"]] == ["fp32_compiled"]
    rows = {v["name"]: v for v in report["variants"]}
    assert set(rows) == {"learned", "hf_llama"} and all(v["compiled"] for v in rows.values())
    assert all(v["compile_s"] > 0 for v in rows.values())
