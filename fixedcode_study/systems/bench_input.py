"""Cost of the input layer alone (`fixedcode bench-input [options] [hydra overrides]`).

Forward and backward time of each input interface at a given width, by default the paper's
(V = 49,152, d_model = 2,048) on a batch of 8 x 2048 tokens:
  forward    ids (B, T) -> (B, T, d) through the real module built by inputs.build_input
  backward   a (B, T, d) upstream gradient pushed into the layer. The learned table computes a
             dense V x d weight gradient; a fixed code has no parameters and integer inputs, so
             autograd stops before it (reported as 0: there is nothing to run)
  optimizer  one AdamW step on the layer's trainable parameters (the table's 2 moments), which a
             training step also pays for the learned input; 0 for fixed codes
Timing is interleaved across variants (one repeat of each in turn), medians reported.

`prototypes=true` also times candidate forward implementations of the fixed codes (same outputs,
checked bit-exactly against the module), to size proposed changes to the inputs package.

Examples:
  fixedcode bench-input                               # paper width, 8 x 2048
  fixedcode bench-input batch=2 seq=2048 prototypes=true

The command (cli/bench_input.py) composes each variant's config and resolves its JobSpec; this
module takes the specs and the options (`InputBenchOptions`).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Mapping
from typing import Any, Callable

import torch

from ..errors import ConfigError
from ..inputs import FixedCode, InputInterface, build_input
from ..spec import JobSpec
from .options import PAPER_D_MODEL, PAPER_VOCAB, InputBenchOptions

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_layer(spec: JobSpec, vocab_size: int, d_model: int) -> InputInterface:
    """The input interface of a job's spec (spec.model.input, references resolved), exactly as training builds it."""
    return build_input(spec.model.input, vocab_size, d_model, float(spec.model.preset.init_std))


# -- prototypes of faster fixed-code forwards (candidates for the inputs package) ------------------------------

def code_table(layer: FixedCode) -> torch.Tensor:
    """(V, K) scaled code values of every ID: the K-wide code, not a V x d table (V*K floats)."""
    ids = torch.arange(layer.vocab_size, device=layer_device(layer))
    return layer.scaled_code(ids)  # (V, K): exactly the first K coordinates forward computes


def layer_device(layer: InputInterface) -> torch.device:
    for t in list(layer.parameters()) + list(layer.buffers()):
        return t.device
    return torch.device("cpu")


def tile_expand(vals: torch.Tensor, d_model: int) -> torch.Tensor:
    """(..., K) -> (..., d_model): one strided copy of a broadcast view, instead of repeat + slice."""
    k = vals.shape[-1]
    reps = math.ceil(d_model / k)
    tiled = vals.unsqueeze(-2).expand(*vals.shape[:-1], reps, k).reshape(*vals.shape[:-1], reps * k)
    return tiled if reps * k == d_model else tiled[..., :d_model].contiguous()


def prototype_forwards(layer: FixedCode) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Candidate forwards that must equal layer(idx) exactly."""
    table = code_table(layer)  # (V, K), built once like a buffer would be
    d = layer.d_model
    return {
        "table+tile_expand": lambda idx: tile_expand(torch.nn.functional.embedding(idx, table), d),
        "table+repeat": lambda idx: torch.nn.functional.embedding(idx, table).repeat(1, 1, math.ceil(d / table.shape[1]))[..., :d],
    }


# -- timing ----------------------------------------------------------------------------------------

def run_input_bench(specs: Mapping[str, JobSpec], options: InputBenchOptions = InputBenchOptions(),
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """The input layer of each job's spec (input variant -> spec, in row order), timed."""
    vocab_size, d_model, batch, seq = options.vocab_size, options.d_model, options.batch, options.seq
    repeats, prototypes, device = options.repeats, options.prototypes, options.device
    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                       "cpu" if device == "auto" else device)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, vocab_size, (batch, seq), generator=g).to(dev)  # (B, T)
    upstream = torch.randn(batch, seq, d_model, generator=g).to(dev)  # dL/d(input vectors)

    cases: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        layer = build_layer(spec, vocab_size, d_model).to(dev)
        params = [p for p in layer.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0) if params else None
        cases[name] = {"layer": layer, "opt": opt, "params": params, "fwd": [], "bwd": [], "opt_t": []}
        if prototypes and isinstance(layer, FixedCode):
            want = layer(idx)
            for pname, fn in prototype_forwards(layer).items():
                if not torch.equal(fn(idx), want):
                    raise AssertionError(f"prototype {pname} differs from {name}'s forward")
                cases[f"{name}:{pname}"] = {"fn": fn, "opt": None, "params": [], "fwd": [], "bwd": [], "opt_t": []}

    def one(case: dict[str, Any]) -> None:
        fn = case.get("fn") or case["layer"]
        _sync(dev)
        t0 = time.perf_counter()
        out = fn(idx)
        _sync(dev)
        t1 = time.perf_counter()
        if out.requires_grad:
            out.backward(upstream)
        _sync(dev)
        t2 = time.perf_counter()
        if case["opt"] is not None:
            case["opt"].step()
            case["opt"].zero_grad(set_to_none=True)
        _sync(dev)
        t3 = time.perf_counter()
        case["fwd"].append(t1 - t0)
        case["bwd"].append(t2 - t1)
        case["opt_t"].append(t3 - t2)

    names = list(cases)
    for name in names:  # warm-up (first AdamW step also allocates the moments)
        one(cases[name])
        for k in ("fwd", "bwd", "opt_t"):
            cases[name][k].clear()
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            one(cases[name])

    rows = []
    for name in names:
        c = cases[name]
        fwd, bwd, opt = (statistics.median(c[k]) * 1e3 for k in ("fwd", "bwd", "opt_t"))
        trainable = sum(p.numel() for p in c["params"])
        rows.append({"name": name, "forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": opt,
                     "forward_backward_ms": fwd + bwd, "total_ms": fwd + bwd + opt,
                     "forward_ms_min": min(c["fwd"]) * 1e3,
                     "trainable_params": trainable, "adamw_state_bytes": 16 * trainable})  # fp32: w, grad, 2 moments
    base = next((r for r in rows if r["name"] == "learned"), None)
    if base:
        for r in rows:
            r["forward_backward_vs_learned"] = r["forward_backward_ms"] / base["forward_backward_ms"]
            r["forward_vs_learned"] = r["forward_ms"] / base["forward_ms"]
    return {"vocab_size": vocab_size, "d_model": d_model, "batch_size": batch, "seq_len": seq,
            "tokens": batch * seq, "repeats": repeats, "device": dev.type, "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(), "rows": rows}


def format_table(rep: dict[str, Any]) -> str:
    lines = [f"input layer alone: V={rep['vocab_size']:,} d_model={rep['d_model']:,} batch {rep['batch_size']}x"
             f"{rep['seq_len']} ({rep['tokens']:,} tokens), {rep['device']} {rep['threads']} threads, "
             f"median of {rep['repeats']}; load avg {rep['load_average'][0]:.1f}",
             f"{'variant':<30} {'fwd ms':>8} {'bwd ms':>8} {'f+b ms':>8} {'vs learned':>10} {'AdamW ms':>9} {'state MiB':>9}"]
    for r in rep["rows"]:
        vs = r.get("forward_backward_vs_learned")
        lines.append(f"{r['name']:<30} {r['forward_ms']:>8.2f} {r['backward_ms']:>8.2f} {r['forward_backward_ms']:>8.2f} "
                     f"{(f'{vs:.3f}x' if vs is not None else '-'):>10} {r['optimizer_ms']:>9.2f} "
                     f"{r['adamw_state_bytes'] / 2**20:>9.1f}")
    return "\n".join(lines)
