"""Cost of each output head (`fixedcode bench-output [options] [hydra overrides]`).

Two parts, each one row per head of conf/output (untied, tied, fixed, fixed_gaussian, bitchain,
bitchain_gf2), every ratio against the untied head (the paper's):

head alone, at paper width (V = 49,152, d_model = 2,048, like bench_input), on random final hidden
states h (B, T, d) and targets (B, T), by default 4 x 512 tokens:
  forward     the training path up to the loss: a teacher-forced head's nll(h, targets) (the bit
              chain walks the target's path only), the others' (B, T, V) logits and the fp32
              cross-entropy (training.speed's loss, what LanguageModelTask.training_step takes)
  backward    that loss's backward: the head's weight gradients and dL/dh (what the body receives)
  generation  the full (B, V) log-probabilities and the greedy pick for one position per sequence,
              what generation computes per new token (the bit chain evaluates all V paths), as tokens/s
  trainable parameters, AdamW moment bytes (fp32: 2 x 4 bytes per trainable parameter, what the
  optimizer holds) and the training state (accounting.adamw_state_bytes: weights, gradients, moments
  and the head's buffers, e.g. a fixed head's V x K code)
The tied head owns no parameter: it is timed as the same matmul against a learned V x d input table
(its weight gradient lands on that table, whose state the input already pays for).
Timing is interleaved across heads (systems.timing.interleaved_calls), medians reported.

whole model, at the composed preset (cpu_tiny unless overridden), per head:
  training    tokens/s of one optimizer step as `run` takes it (systems.fit: a Lightning Trainer.fit
              of LanguageModelTask), the abba passes of systems/timing.py, median
  generation  tokens/s of greedy decoding as evaluation/lm.py's generate_until does it (the whole
              window through the model each step, no KV cache; head(h_last).argmax), B sequences of
              `prompt_len` random tokens, `new_tokens` each
A fixed input has no table to tie, so there `tied` is left out of this part (said in the log).

The command (cli/bench_output.py) composes one config per head and resolves its JobSpec (a
`HeadCase`); this module takes them and the options (`OutputBenchOptions`).
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from .. import accounting
from ..build import build_decoder
from ..errors import ConfigError
from ..inputs import LearnedEmbedding, build_input
from ..heads import OutputHead, build_output, check_output, output_flops_per_token
from ..spec import JobSpec
from ..training.speed import loss_functions
from .bench import pick_device
from .options import OutputBenchOptions
from .fit import SETTINGS
from .meters import PeakMeters, sync
from .timing import Subject, interleaved_calls, pass_plan, resolve_schedule, timed_passes

BASELINE = "untied"
BENCH_OUTPUT_VERSION = 1


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def _vs(rows: list[dict[str, Any]], key: str, out: str) -> None:
    """row[out] = row[key] / the untied row's (absent when there is no untied row)."""
    base = next((r for r in rows if r["name"] == BASELINE), None)
    for r in rows:
        if base and base[key]:
            r[out] = r[key] / base[key]


# -- the head alone --------------------------------------------------------------------------------

@dataclass(frozen=True)
class HeadCase:
    """One head of the benchmark: the job's spec with this head, on the job's input, or, when the
    head cannot sit on that input (a tied head needs a learned table: `why`), on input=learned,
    which is what the head part builds it on anyway; the whole-model part leaves such a head out."""
    spec: JobSpec
    why: str = ""            # "": the head sits on the job's input

    @property
    def usable(self) -> bool:
        return not self.why


def build_head(spec: JobSpec, vocab_size: int, d_model: int, device: torch.device
               ) -> tuple[OutputHead, list[torch.nn.Parameter], dict[str, Any]]:
    """(the head of spec.model.output at this width, initialised as the Decoder does; every parameter
    its backward writes a gradient into: for `tied`, a fresh learned V x d table it is tied to; the
    output config with its references resolved)."""
    std = float(spec.model.preset.init_std)
    output = dict(spec.model.output)
    table_cfg = {"name": "learned", "type": "learned"}  # what a tied head needs; the others ignore it
    check_output(output or {"type": "untied"}, table_cfg)
    tied = output.get("type") == "tied"
    with torch.random.fork_rng(devices=[]), torch.device("cpu" if tied else "meta"):  # only a tied head reads it
        table = build_input(table_cfg, vocab_size, d_model, std)
    with torch.random.fork_rng(devices=[]):
        head = build_output(output, vocab_size, d_model, std, table)
    g = torch.Generator().manual_seed(spec.seed)
    head.reset_parameters(g, std)
    written = list(head.parameters())
    if tied:
        assert isinstance(table, LearnedEmbedding)
        table.reset_parameters(g)
        written = list(table.parameters())
        table.to(device)
    return head.to(device), written, output


def head_call(head: OutputHead, written: list[torch.nn.Parameter], h: torch.Tensor, targets: torch.Tensor,
              last: torch.Tensor, device: torch.device) -> Callable[[], dict[str, float]]:
    """One timed training forward + backward and one generation step of the head, as a call."""
    mean_nll = loss_functions(compiled=False)[0]

    def call() -> dict[str, float]:
        sync(device)
        t0 = time.perf_counter()
        loss = head.nll(h, targets).mean() if head.teacher_forced else mean_nll(head(h), targets)
        sync(device)
        t1 = time.perf_counter()
        loss.backward()
        sync(device)
        t2 = time.perf_counter()
        with torch.no_grad():
            F.log_softmax(head(last).float(), dim=-1).argmax(dim=-1)  # (B, V) log-probs -> (B,) picks
        sync(device)
        t3 = time.perf_counter()
        for p in written:
            p.grad = None
        h.grad = None
        return {"forward": t1 - t0, "backward": t2 - t1, "generation": t3 - t2}

    return call


def run_head_bench(heads: Mapping[str, HeadCase], options: OutputBenchOptions = OutputBenchOptions(),
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Each head (head name -> HeadCase, in row order) alone, timed."""
    V, d, B, T = options.vocab_size, options.d_model, options.batch, options.seq
    device = pick_device(options.device)
    g = torch.Generator().manual_seed(0)
    h = torch.randn(B, T, d, generator=g).to(device).requires_grad_()  # final-norm hidden states: unit RMS
    targets = torch.randint(0, V, (B, T), generator=g).to(device)
    last = torch.randn(B, d, generator=g).to(device)  # one position per sequence
    log(f"bench-output: heads alone, V={V:,} d_model={d:,}, {B} x {T} tokens, {device}, "
        f"{torch.get_num_threads()} threads, {options.repeats} repeats")
    built = {name: build_head(case.spec, V, d, device) for name, case in heads.items()}
    times = interleaved_calls({name: head_call(head, written, h, targets, last, device)
                               for name, (head, written, _) in built.items()}, options.repeats)
    rows = []
    for name, (head, _, output) in built.items():
        t = times[name]
        trainable = [p for p in head.parameters() if p.requires_grad]
        state = accounting.adamw_state_bytes(head, [{"name": "head", "params": trainable}])
        fwd, bwd, gen = _median_ms(t["forward"]), _median_ms(t["backward"]), _median_ms(t["generation"])
        rows.append({"name": name, "type": head.kind, "forward_ms": fwd, "backward_ms": bwd,
                     "forward_backward_ms": fwd + bwd, "training_tokens_per_s": B * T / ((fwd + bwd) / 1e3),
                     "generation_ms": gen, "generation_tokens_per_s": B / (gen / 1e3),
                     "trainable_params": state["trainable_params"], "optimizer_state_bytes": state["adam_moment_bytes"],
                     "buffer_bytes": state["buffer_bytes"], "state_bytes": state["total_bytes"],
                     "training_flops_per_token": output_flops_per_token(output or {"type": "untied"}, V, d)})
    del built
    _vs(rows, "forward_backward_ms", "forward_backward_vs_untied")
    _vs(rows, "generation_ms", "generation_vs_untied")
    _vs(rows, "state_bytes", "state_vs_untied")
    return {"vocab_size": V, "d_model": d, "batch_size": B, "seq_len": T, "tokens": B * T,
            "repeats": options.repeats, "device": device.type, "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(), "rows": rows}


# -- the whole model -------------------------------------------------------------------------------

def greedy_call(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int,
                device: torch.device) -> Callable[[], dict[str, float]]:
    """One timed greedy generation of `new_tokens` per sequence, as evaluation/lm.py's _greedy
    computes it: the (sliding) window through the model, the head at the last position, argmax."""
    max_len = int(model.config.max_seq_len)

    def call() -> dict[str, float]:
        seqs = prompt
        sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(new_tokens):
                hidden = model.features(seqs[:, -max_len:])[:, -1]  # (B, d)
                seqs = torch.cat([seqs, model.head(hidden).argmax(dim=-1)[:, None]], dim=1)
        sync(device)
        return {"generation": time.perf_counter() - t0}

    return call


def run_model_bench(heads: Mapping[str, HeadCase], options: OutputBenchOptions = OutputBenchOptions(),
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole model with each head (head name -> HeadCase) trained and generating, timed."""
    for name, case in heads.items():
        if not case.usable:
            log(f"bench-output: {name} left out of the whole-model part: {case.why}")
    specs = {name: case.spec for name, case in heads.items() if case.usable}
    if not specs:
        raise ConfigError("outputs", "no head can be built on this input", "use input=learned or other heads")
    first = next(iter(specs.values()))
    mcfg = first.model.preset
    B, T = first.train.batch_size, first.train.seq_len
    if T > mcfg.max_seq_len or options.prompt_len > mcfg.max_seq_len:
        raise ConfigError("train.seq_len", f"{T} (or prompt_len {options.prompt_len}) exceeds model.max_seq_len="
                          f"{mcfg.max_seq_len}", "lower train.seq_len / prompt_len")
    device, setting = pick_device(options.device), SETTINGS[options.setting]
    schedule = resolve_schedule("abba", options.steps)
    g = torch.Generator().manual_seed(first.seed)
    batch = torch.randint(0, mcfg.vocab_size, (B, T + 1), generator=g).to(device)  # (B, T+1)
    prompt = torch.randint(0, mcfg.vocab_size, (options.batch, options.prompt_len), generator=g).to(device)
    log(f"bench-output: whole model={first.model_name}, training B={B} T={T} {setting.name} ({options.steps} steps "
        f"+ {options.warmup} warm-up per fit, {schedule}); generation {options.batch} x {options.new_tokens} new "
        f"tokens after {options.prompt_len}")
    subjects = [Subject(name, name, setting, spec) for name, spec in specs.items()]
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-output-"))
    try:
        fits = timed_passes(subjects, pass_plan(list(specs), options.steps, schedule), options.warmup, device,
                            batch, workdir, PeakMeters(device, []))  # no MFU here: no peak to sample
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    models = {name: build_decoder(spec.model, seed=spec.seed).to(device).eval() for name, spec in specs.items()}
    gen = interleaved_calls({name: greedy_call(m, prompt, options.new_tokens, device) for name, m in models.items()},
                            options.repeats)
    rows = []
    for name, spec in specs.items():
        r, step = fits[name], statistics.median(fits[name]["wall"])
        gen_s = statistics.median(gen[name]["generation"])
        rows.append({"name": name, "input": spec.input_name, "step_ms": step * 1e3, "training_tokens_per_s": B * T / step,
                     "generation_ms": gen_s * 1e3, "generation_tokens_per_s": options.batch * options.new_tokens / gen_s,
                     "trainable_params": r["trainable_params"], "head_trainable_params":
                     sum(p.numel() for p in models[name].head.parameters() if p.requires_grad),
                     "optimizer_state_bytes": r["state"]["optimizer_state_bytes"], "state_bytes": r["state"]["total_bytes"],
                     "first_loss": r["first_losses"][0], "checkpoint_bytes": r["checkpoint"]["total_bytes"]})
    del models
    _vs(rows, "step_ms", "step_vs_untied")
    _vs(rows, "generation_ms", "generation_vs_untied")
    _vs(rows, "state_bytes", "state_vs_untied")
    return {"model": first.model_name, "architecture": mcfg.to_dict(), "batch_size": B, "seq_len": T,
            "steps": options.steps, "warmup": options.warmup, "schedule": schedule, "setting": vars(setting),
            "generation": {"batch": options.batch, "prompt_len": options.prompt_len, "new_tokens": options.new_tokens,
                           "repeats": options.repeats, "kv_cache": False},
            "device": device.type, "threads": torch.get_num_threads(), "load_average": os.getloadavg(), "rows": rows}


def run_output_bench(heads: Mapping[str, HeadCase], options: OutputBenchOptions = OutputBenchOptions(),
                     overrides: list[str] | tuple[str, ...] = (), log: Callable[[str], None] = print) -> dict[str, Any]:
    """Both parts (or the one `options.part` names) of the head benchmark, as one report."""
    rep: dict[str, Any] = {"bench_output_version": BENCH_OUTPUT_VERSION, "overrides": list(overrides),
                           "outputs": {name: case.spec.record_config()["output"] for name, case in heads.items()}}
    if options.part in ("all", "head"):
        rep["head"] = run_head_bench(heads, options, log)
    if options.part in ("all", "model"):
        rep["model"] = run_model_bench(heads, options, log)
    return rep


# -- tables (markdown) -----------------------------------------------------------------------------

def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _x(r: float | None) -> str:
    if r is None or not math.isfinite(r):
        return "-"
    if r == 0:
        return "0"
    return f"{r:.2f}x" if r >= 0.095 else f"{r:.3f}x" if r >= 0.00095 else f"{r:.1e}x"


def _table(header: list[str], lines: list[list[str]]) -> list[str]:
    widths = [max(len(header[i]), *(len(line[i]) for line in lines)) for i in range(len(header))]
    fmt = lambda cells: "| " + " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    return [fmt(header), "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|",
            *map(fmt, lines)]


def format_head_table(rep: dict[str, Any]) -> str:
    head = [f"Output heads alone: V={rep['vocab_size']:,}, d_model={rep['d_model']:,}, training on {rep['batch_size']} x "
            f"{rep['seq_len']} tokens, generation {rep['batch_size']} positions; {rep['device']}, {rep['threads']} threads, "
            f"median of {rep['repeats']}, load avg {rep['load_average'][0]:.1f}. x untied = time (state) over the untied head's; "
            "tied is timed against a learned V x d table, whose state is the input's.",
            ""]
    lines = [[r["name"], f"{r['forward_ms']:.1f}", f"{r['backward_ms']:.1f}", f"{r['forward_backward_ms']:.1f}",
              _x(r.get("forward_backward_vs_untied")), f"{r['generation_ms']:.2f}", f"{r['generation_tokens_per_s']:,.0f}",
              _x(r.get("generation_vs_untied")), f"{r['trainable_params']:,}", _mib(r["optimizer_state_bytes"]),
              _mib(r["buffer_bytes"]), _mib(r["state_bytes"]), _x(r.get("state_vs_untied"))]
             for r in rep["rows"]]
    return "\n".join(head + _table(["head", "fwd ms", "bwd ms", "f+b ms", "f+b x untied", "gen ms", "gen tok/s",
                                    "gen x untied", "trainable", "AdamW MiB", "buffers MiB", "state MiB",
                                    "state x untied"], lines))


def format_model_table(rep: dict[str, Any]) -> str:
    g = rep["generation"]
    head = [f"Whole model per head: model={rep['model']}, training B={rep['batch_size']} T={rep['seq_len']} "
            f"{rep['setting']['name']} ({rep['steps']} steps, {rep['schedule']}, median); greedy generation {g['batch']} x "
            f"{g['new_tokens']} tokens after {g['prompt_len']} (no KV cache, median of {g['repeats']}); {rep['device']}, "
            f"{rep['threads']} threads, load avg {rep['load_average'][0]:.1f}. x untied = time (state) over the untied head's.",
            ""]
    lines = [[r["name"], f"{r['step_ms']:.1f}", f"{r['training_tokens_per_s']:,.0f}", _x(r.get("step_vs_untied")),
              f"{r['generation_tokens_per_s']:,.0f}", _x(r.get("generation_vs_untied")), f"{r['trainable_params']:,}",
              f"{r['head_trainable_params']:,}", _mib(r["optimizer_state_bytes"]), _mib(r["state_bytes"]),
              _x(r.get("state_vs_untied")), f"{r['first_loss']:.3f}"] for r in rep["rows"]]
    return "\n".join(head + _table(["head", "step ms", "train tok/s", "step x untied", "gen tok/s", "gen x untied",
                                    "trainable", "head trainable", "AdamW MiB", "state MiB", "state x untied", "loss0"],
                                   lines))


def format_tables(rep: dict[str, Any]) -> str:
    parts = [format_head_table(rep["head"])] if "head" in rep else []
    return "\n\n".join(parts + ([format_model_table(rep["model"])] if "model" in rep else []))
