"""The speed settings' mechanics (training/speed.py, conf/trainer/cpu.yaml): what bf16-mixed keeps in
fp32, what train.compile=auto decides and where that lands (fingerprint, results.json "runtime"), and
the threads setting. How fast each setting is, and whether bf16 curves stay within seed noise of fp32
ones, are benchmark numbers (fixedcode bench settings=all; docs/measurements.md), not tests.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from fixedcode_study.build import build_model
from fixedcode_study.config import compose
from fixedcode_study.errors import ConfigError
from fixedcode_study.model import attention
from fixedcode_study.spec import JobSpec
from fixedcode_study.training.job import run_job
from fixedcode_study import hardware
from fixedcode_study.hardware import native_bf16
from fixedcode_study.training.speed import loss_functions, resolve_compile, resolve_threads
from fixedcode_study.training.task import LanguageModelTask
from helpers import SMALL_VAL

TINY = ["model=test_micro", "logger=csv", "train.tokens=4096", "train.batch_size=8", "train.val_points=2"]


def test_cpu_precision_where_bf16_wins(monkeypatch):
    cfg = compose([])
    assert cfg.trainer.precision == ("bf16-mixed" if native_bf16() else "32-true") and cfg.train.compile == "auto"
    assert compose(TINY).trainer.precision == "32-true"  # d_model=64: the casts cost more than bf16 saves
    assert compose(["trainer.precision=bf16-mixed", *TINY]).trainer.precision == "bf16-mixed"  # forced
    monkeypatch.setattr(hardware, "native_bf16", lambda: False)  # a CPU without bf16 instructions
    assert hardware.cpu_precision(2048) == "32-true"
    monkeypatch.setattr(hardware, "native_bf16", lambda: True)
    assert hardware.cpu_precision(128) == "bf16-mixed" and hardware.cpu_precision(64) == "32-true"


def test_compile_auto_by_job_size():
    assert JobSpec.from_cfg(compose([])).runtime.compile  # cpu_tiny at the default budget: 4.6e12 FLOPs, compiled
    assert not JobSpec.from_cfg(compose(TINY)).runtime.compile  # a test-sized job is not worth a compile


def test_compile_auto_threshold_and_bad_values():
    assert resolve_compile("auto", 1e12, 1e12)
    assert not resolve_compile("auto", 1e12, 9.9e11)
    assert resolve_compile(True, None, 0) and not resolve_compile(False, None, 1e30)
    with pytest.raises(ConfigError, match="train.compile"):
        resolve_compile("yes", 1e12, 1.0)
    with pytest.raises(ConfigError, match="train.compile_min_flops"):
        resolve_compile("auto", -1, 1.0)
    for bad, field in (("train.compile=yes", "train.compile"), ("train.compile_min_flops=-1", "train.compile_min_flops")):
        with pytest.raises(ConfigError, match=f"^{field}:"):  # the job's spec refuses them where it is built
            JobSpec.from_cfg(compose([*TINY, bad]))


def test_threads_setting(monkeypatch):
    monkeypatch.delenv("FIXEDCODE_THREADS_PER_JOB", raising=False)
    assert resolve_threads("auto") == torch.get_num_threads()
    monkeypatch.setenv("FIXEDCODE_THREADS_PER_JOB", "1")
    assert resolve_threads("auto") == 1 and resolve_threads(3) == 3
    for bad in (0, -2, "two", True):
        with pytest.raises(ConfigError, match="threads"):
            resolve_threads(bad)


def test_fingerprint_holds_compile_but_not_threads():
    def fingerprint(*extra: str):
        return JobSpec.from_cfg(compose([*TINY, *extra])).fingerprint

    fp = fingerprint()
    assert fp["settings"]["plan.compile"] is False
    assert fingerprint("train.compile=true")["sha"] != fp["sha"]
    assert fingerprint("threads=1")["sha"] == fp["sha"]  # like trainer.devices: how, not what
    assert fingerprint("trainer.precision=bf16-mixed")["sha"] != fp["sha"]


def test_cpu_attention_scores_stay_fp32_under_bf16_autocast():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), gqa=False)
    assert y.dtype == torch.float32
    expect = F.scaled_dot_product_attention(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(),
                                            is_causal=True)
    assert torch.equal(y, expect)
    # As in the model: q and k come out of the fp32 rotary tables in fp32, v from a bf16 matmul.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attention(q, k, v.bfloat16(), gqa=False)
    expect = F.scaled_dot_product_attention(q, k, v.bfloat16().float(), is_causal=True)
    assert y.dtype == torch.float32 and torch.equal(y, expect)
    # Outside autocast (fp32 runs) it is exactly torch's attention.
    assert torch.equal(attention(q, k, v, gqa=False), F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_cpu_attention_matches_torch_to_the_bit_forward_and_backward_whichever_kernel_torch_picks():
    """Without grouped-query heads, `attention` calls torch's CPU flash kernel itself; it must be the
    kernel F.scaled_dot_product_attention picks, in values and gradients, and follow it to the math
    kernel where flash is switched off."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g, requires_grad=True) for _ in range(3))
    up = torch.randn(2, 4, 16, 8, generator=g)

    def run(fn, autocast: bool):
        for t in (q, k, v):
            t.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = fn()
        y.backward(up)  # outside autocast, as Lightning's bf16-mixed plugin runs it
        return y.detach(), [t.grad.clone() for t in (q, k, v)]

    for flash in (True, False):
        before = torch.backends.cuda.flash_sdp_enabled()
        torch.backends.cuda.enable_flash_sdp(flash)
        try:
            ours = run(lambda: attention(q, k, v, gqa=False), autocast=True)
            torch_s = run(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), autocast=False)
        finally:
            torch.backends.cuda.enable_flash_sdp(before)
        assert torch.equal(ours[0], torch_s[0]) and all(torch.equal(a, b) for a, b in zip(ours[1], torch_s[1]))
    # Grouped-query heads keep torch's own path (autocast off around it).
    kv = torch.randn(2, 2, 16, 8, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attention(q.detach(), kv, kv, gqa=True)
    assert torch.equal(y, F.scaled_dot_product_attention(q.detach(), kv, kv, is_causal=True, enable_gqa=True))


def test_compiled_cpu_attention_has_no_autocast_region_and_no_graph_break():
    """An autocast region inside a compiled graph makes AOTAutograd's cache refuse the graph
    ("Unsupported call_function target _enter_autocast"), so every job traced and partitioned the
    model again: 2-3 s a job with a warm cache. The graph dynamo hands its backend is checked here;
    fullgraph=True fails on a graph break (a bool torch.* call inside the traced code was one)."""
    from fixedcode_study.model import CausalSelfAttention, ModelConfig

    seen: list[str] = []

    def backend(gm, example_inputs):
        seen.extend(str(node.target) for node in gm.graph.nodes)
        return gm.forward

    cfg = ModelConfig(vocab_size=64, n_layer=1, n_head=4, d_model=32, d_ff=64, max_seq_len=16)
    layer = CausalSelfAttention(cfg)
    x = torch.randn(2, 16, 32)
    cos, sin = torch.ones(16, 8), torch.zeros(16, 8)  # (T, head_dim): rotation by 0
    torch._dynamo.reset()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.compile(layer, backend=backend, fullgraph=True)(x, cos, sin).sum().backward()
    finally:
        torch._dynamo.reset()
    assert any("flash_attention_for_cpu" in target for target in seen), seen
    assert not any("autocast" in target for target in seen), [t for t in seen if "autocast" in t]


def test_bf16_mixed_step_runs_matmuls_in_bf16_and_the_loss_in_fp32():
    cfg = compose([*TINY, "trainer.precision=bf16-mixed"])
    spec = JobSpec.from_cfg(cfg)
    model = build_model(cfg.model, cfg.input, seed=1)
    task = LanguageModelTask(model, spec.optim, 4, 8 * 64, torch.ones(cfg.model.vocab_size))
    seen = {}
    model.head.register_forward_hook(lambda m, i, o: seen.update(head=o.dtype))  # returns None: output kept
    batch = torch.randint(0, cfg.model.vocab_size, (2, 65), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what Lightning's bf16-mixed plugin wraps the step in
        loss = task.training_step(batch, 0)
    assert seen["head"] == torch.bfloat16 and loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    mean_nll, token_nll = loss_functions(compiled=False)
    logits = torch.randn(2, 3, 11, dtype=torch.bfloat16)
    y = torch.randint(0, 11, (2, 3))
    assert mean_nll(logits, y).dtype == torch.float32 and token_nll(logits, y).shape == (2, 3)


def test_job_records_its_runtime(tmp_path):
    cfg = compose([*TINY, f"out_root={tmp_path}", "threads=1", "trainer.precision=bf16-mixed"])
    before = torch.get_num_threads()
    try:
        record = run_job(JobSpec.from_cfg(cfg), tmp_path / "job").record
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)  # the rest of the session keeps its cores
    assert record["status"] == "completed"
    deterministic = record["runtime"].pop("deterministic")
    assert record["runtime"] == {"precision": "bf16-mixed", "compile": False, "threads": 1, "accelerator": "cpu",
                                 "keep_freed_memory": sys.platform.startswith("linux")}
    assert deterministic["bitwise"] is True and "runtime.threads (1)" in deterministic["scope"]


@pytest.mark.parametrize("accelerator, asked, bitwise", [
    ("cpu", None, True), ("gpu", None, False), ("cuda", True, True), ("gpu", False, False)])
def test_the_record_says_when_a_runtime_is_not_bitwise_deterministic(accelerator, asked, bitwise):
    """Issue 26: runtime.deterministic states what the same config and seed promise on this runtime,
    with the reason; on CUDA only trainer.deterministic=true (torch's deterministic algorithms) is bitwise."""
    overrides = [*TINY, f"trainer.accelerator={accelerator}"] + ([f"+trainer.deterministic={str(asked).lower()}"]
                                                              if asked is not None else [])
    spec = JobSpec.from_cfg(compose(overrides))
    stated = spec.runtime.record()["deterministic"]
    assert stated["bitwise"] is bitwise and stated["reason"]
    if not bitwise:
        assert "trainer.deterministic=true" in stated["reason"]  # says what to change
    assert ("runtime.threads" in stated["scope"]) is (accelerator == "cpu")


# bf16-mixed only where the CPU has bf16 instructions: emulated, one cpu_tiny step takes minutes
PRECISIONS = ["32-true", pytest.param("bf16-mixed", marks=pytest.mark.skipif(
    not native_bf16(), reason="this CPU has no bf16 instructions (emulated bf16 is minutes per step)"))]


# The compiled jobs of the two tests below: test_micro cut to one block (each block compiles to the same
# kernels; fewer kernels to build) at 2 threads and 2048 tokens a step (batch 32 x 64: at its test batch
# of 8 x 64 test_micro never showed the drift), 8 steps, checkpoints every 2 steps and the step-4 one
# kept (the resume test kills after it). With issue 26's bug planted back (the learned input layer
# compiled too: speed.compile_model), two runs of this job differed in their last bits 3 times of 3 (as
# the cpu_tiny job this one replaces did) and the resume test failed; train metrics are logged every 2
# steps so that metrics.csv holds a row at each checkpoint. The compile threshold is lowered instead of
# train.compile=true: the path `auto` takes.
COMPILED_2T = ["model=test_micro", "model.n_layer=1", "train.batch_size=32", "input=learned", "logger=csv",
               "train.tokens=16384", "train.val_points=2", "train.log_every=2", SMALL_VAL, "train.compile_min_flops=0",
               "threads=2", "seed=7", "checkpoint.every_steps=2", "checkpoint.keep_every_steps=4"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """precision -> (record, job dir) of one uninterrupted COMPILED_2T job, trained in this process once
    and shared by the repeat and the resume test (their compiled kernels come from one compile)."""
    done: dict[str, tuple[dict, object]] = {}

    def job(precision: str):
        if precision not in done:
            root = tmp_path_factory.mktemp(f"uninterrupted-{precision}")
            before = torch.get_num_threads()
            try:
                outcome = run_job(JobSpec.from_cfg(compose([*COMPILED_2T, f"trainer.precision={precision}",
                                                            f"out_root={root}"])), root / "job")
            finally:
                torch.set_num_threads(before)  # the rest of the session keeps its cores
            record = outcome.record
            assert record["status"] == "completed" and record["runtime"]["threads"] == 2
            assert record["runtime"]["compile"] is True and record["runtime"]["precision"] == precision
            done[precision] = (record, root / "job")
        return done[precision]

    return job


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_compiled_learned_job_at_two_threads_repeats_bitwise(tmp_path, precision, uninterrupted):
    """Issue 26: the compiled learned table's backward added its (V, d) gradient with atomic adds
    across OpenMP threads, so the same job run twice at 2 threads ended in other last bits (4 of 4
    runs differed here). The shared uninterrupted job, run again in this process, ends bitwise equal:
    final numbers and every metrics.csv row but the timing ones."""
    from helpers.distributed import metric_rows

    first, first_job = uninterrupted(precision)
    before = torch.get_num_threads()
    try:
        again = run_job(JobSpec.from_cfg(compose([*COMPILED_2T, f"trainer.precision={precision}",
                                                  f"out_root={tmp_path}"])), tmp_path / "job").record
    finally:
        torch.set_num_threads(before)
    assert again["status"] == "completed" and again["runtime"]["threads"] == 2
    assert again["runtime"]["compile"] is True and again["runtime"]["precision"] == precision
    assert again["final"] == first["final"]
    assert metric_rows(tmp_path / "job") == metric_rows(first_job)


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_compiled_two_thread_job_killed_with_sigkill_resumes_bitwise(tmp_path, precision, uninterrupted):
    """Issue 26: a compiled job at 2 threads, SIGKILLed after its step-4 checkpoint and re-run with
    the same command, ends bitwise equal to the uninterrupted job: final numbers and every metrics.csv
    row but the timing ones. The resumed attempt compiles the same kernels as a fresh one (the same
    graph, input eager), so only the reduction order could differ, and it must not."""
    import signal

    from helpers.distributed import metric_rows, only_job, results, start, stop, wait_for

    args = [*COMPILED_2T, f"trainer.precision={precision}"]
    reference, whole = uninterrupted(precision)
    killed = tmp_path / "killed"
    killed.mkdir()
    proc = start([*args, f"out_root={killed}"], killed, killed / "attempt1.log")
    wait_for("**/checkpoints/step-0000004.ckpt", killed, proc)
    assert stop(proc, signal.SIGKILL) == -signal.SIGKILL
    job = only_job(killed)
    assert results(job)["status"] == "running"  # killed for real, mid-training
    proc = start([*args, f"out_root={killed}"], killed, killed / "attempt2.log")  # the same command again
    assert proc.wait(timeout=900) == 0, (killed / "attempt2.log").read_text()[-3000:]
    resumed = results(job)
    assert resumed["status"] == "completed" and resumed["resumed_from_step"] >= 4
    assert resumed["runtime"]["compile"] is True and resumed["runtime"]["deterministic"]["bitwise"] is True
    assert resumed["final"] == reference["final"]
    assert metric_rows(job) == metric_rows(whole)


@pytest.mark.slow
def test_keeping_freed_memory_sets_glibcs_malloc_once_and_can_be_left_alone():
    """training/speed.py keep_freed_memory: mallopt's three settings on glibc (each returns 1), once
    per process; FIXEDCODE_KEEP_FREED_MEMORY=0 leaves malloc as it is; a bad value stops with one line
    naming the variable. The setting is process-wide, so it is read in a process of its own (not this
    one), one process for the three values: malloc is left alone (0) and the bad value refused before
    the default sets it, and the once-per-process cache is cleared between them."""
    import subprocess

    code = textwrap.dedent("""
        import os
        from fixedcode_study.errors import ConfigError
        from fixedcode_study.training.speed import keep_freed_memory as k

        def once(value):
            if value is None:
                os.environ.pop("FIXEDCODE_KEEP_FREED_MEMORY", None)
            else:
                os.environ["FIXEDCODE_KEEP_FREED_MEMORY"] = value
            k.cache_clear()
            try:
                return f"{k()} {k()} {k.cache_info().misses}"
            except ConfigError as e:
                return f"error: {e}"

        for value in ("0", "no", None):
            print(once(value))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    left_alone, refused, kept = out.stdout.strip().splitlines()
    assert left_alone == "False False 1", out.stderr
    assert refused == ("error: FIXEDCODE_KEEP_FREED_MEMORY: got 'no'; set it to 1 (keep, the default) or 0 "
                       "(leave malloc as it is)")
    linux = sys.platform.startswith("linux")
    assert kept == f"{linux} {linux} 1", out.stderr


@pytest.mark.slow
def test_keeping_freed_memory_moves_no_number(tmp_path):
    """The same job with malloc as glibc leaves it and with freed memory kept: every metric and the
    final validation bitwise equal (only where memory comes from changes). 4 steps of the resume
    tests' job (train loss logged at steps 2 and 4, validations at 1 and 4). Kept: run in this
    process, whose jobs keep freed memory (the default, as test_job_records_its_runtime checks);
    left alone: a process of its own, as the setting is process-wide."""
    import json
    import subprocess

    from tests.helpers.distributed import TINY

    job = [arg if not arg.startswith("train.tokens=") else "train.tokens=4096" for arg in TINY]
    before = torch.get_num_threads()
    try:
        run_job(JobSpec.from_cfg(compose([*job, "threads=1", f"out_root={tmp_path / '1'}"])), tmp_path / "1" / "job")
    finally:
        torch.set_num_threads(before)  # the rest of the session keeps its cores
    out = subprocess.run([sys.executable, "-m", "fixedcode_study.run", *job, "threads=1", f"out_root={tmp_path / '0'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "FIXEDCODE_KEEP_FREED_MEMORY": "0"})
    assert out.returncode == 0, out.stderr[-2000:]
    finals, curves = [], []
    for keep in ("1", "0"):
        (results,) = (tmp_path / keep).rglob("results.json")
        record = json.loads(results.read_text())
        assert record["runtime"]["keep_freed_memory"] is (keep == "1" and sys.platform.startswith("linux"))
        finals.append(record["final"])
        curves.append([line for line in (results.parent / "metrics.csv").read_text().splitlines()
                       if "/loss" in line or "val_" in line])
    assert finals[0] == finals[1] and curves[0] == curves[1] and curves[0]
