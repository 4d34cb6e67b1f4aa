"""The benchmark's report: one row per model and setting from what the passes measured, MFU, the
ratios to the reference, the meta-device state accounting, and the tables printed from it.

MFU of a row = its tokens/s x its own model's FLOPs per token (accounting.flops_per_token of the
model actually built: a size-matched body costs more per token than the preset's) over the peak of
the precision the row runs in (systems/meters.py). Each row is compared with the fastest reference
row ("HF in its fastest equivalent setting") and with the reference in its own setting.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from .. import accounting
from ..build import build_decoder
from ..model import ModelConfig
from ..spec import JobSpec
from .fit import REFERENCE, SETTINGS
from .timing import Subject

# 4: every row carries its own model's flops_per_token and its MFU is computed from it (3 used the
# first variant's preset for every row, wrong for size-matched bodies).
BENCH_VERSION = 4


def row_flops_per_token(architecture: ModelConfig, seq_len: int) -> float:
    return accounting.flops_per_token(architecture, seq_len)["total"]


def variant_rows(chosen: list[Subject], results: dict[str, dict[str, Any]], memory: dict[str, int],
                 peaks: dict[str, dict[str, Any]], tokens_per_step: int, seq_len: int,
                 cpu: bool) -> list[dict[str, Any]]:
    """One row per subject: median step, tokens/s, MFU over its own FLOPs, state, checkpoint, memory."""
    rows = []
    for s in chosen:
        r, st = results[s.key], s.setting
        med = statistics.median(r["wall"])
        tps = tokens_per_step / med
        peak = peaks[str(st.dtype)]
        fpt = row_flops_per_token(r["architecture"], seq_len)
        row = {
            "name": s.key,
            "model_name": s.name,
            "setting": st.name, "precision": st.precision, "compiled": st.compile,
            "kind": "reference" if s.name == REFERENCE else "ours",
            "step_ms_median": med * 1e3,
            "step_ms_min": min(r["wall"]) * 1e3,
            "first_step_s": max(r["first_step"]),
            "compile_s": max(r["first_step"]) - med if st.compile else 0.0,
            "tokens_per_s": tps,
            "flops_per_token": fpt,
            "mfu": tps * fpt / peak["flops"],
            "peak_flops": peak["flops"],
            "first_loss": r["first_losses"][0],
            "trainable_params": r["trainable_params"],
            "optimizer_groups": r["optimizer_groups"],
            "lightning_module": r["lightning_module"],
            "state": r["state"],
            "checkpoint": r["checkpoint"],
            "peak_memory_bytes": memory[s.key],
        }
        if cpu:
            row["step_cpu_ms_median"] = statistics.median(r["cpu"]) * 1e3
        rows.append(row)
    return rows


def side_by_side_mfu(side_by_side: list[dict[str, Any]], variants: list[dict[str, Any]],
                     peaks: dict[str, dict[str, Any]]) -> None:
    """MFU of each jobs-side-by-side row, from the FLOPs of the same model's own row."""
    own = {(v["model_name"], v["setting"]): v["flops_per_token"] for v in variants}
    for row in side_by_side:
        row["flops_per_token"] = own[(row["model_name"], row["setting"])]
        row["mfu"] = row["tokens_per_s"] * row["flops_per_token"] / peaks[str(SETTINGS[row["setting"]].dtype)]["flops"]


def compare_with_reference(variants: list[dict[str, Any]], side_by_side: list[dict[str, Any]]) -> None:
    """tokens/s (and on CPU, CPU time) of every row over the fastest reference row and the reference
    row of its own setting (its precision and compile: a _input setting's is its plain twin's, the
    reference running once for both, timing.subjects), where there is one."""
    refs = {(v["precision"], v["compiled"]): v for v in variants if v["kind"] == "reference"}
    if not refs:
        return
    fastest = max(refs.values(), key=lambda v: v["tokens_per_s"])
    for row in variants + side_by_side:
        row["tokens_per_s_vs_reference"] = row["tokens_per_s"] / fastest["tokens_per_s"]
        row["reference_row"] = fastest["name"]
        same = refs.get((row["precision"], row["compiled"]))
        if same:
            row["tokens_per_s_vs_reference_same_setting"] = row["tokens_per_s"] / same["tokens_per_s"]
            if "step_cpu_ms_median" in row and "step_cpu_ms_median" in same:
                row["cpu_time_speedup_vs_reference"] = same["step_cpu_ms_median"] / row["step_cpu_ms_median"]


# -- state accounting (no model is run) ------------------------------------------------------------

def state_only(specs: dict[str, JobSpec]) -> dict[str, Any]:
    """AdamW fp32 training-state accounting per variant from a meta-device build (the groups
    training uses: accounting.optimizer_groups), plus each variant's saving relative to learned."""
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        with torch.device("meta"):
            model = build_decoder(spec.model)
        out[name] = accounting.adamw_state_bytes(model, accounting.optimizer_groups(model, spec.optim.groups_settings()))
    if "learned" in out:
        base = out["learned"]["total_bytes"]
        for name, acc in out.items():
            acc["saving_vs_learned_bytes"] = base - acc["total_bytes"]
            acc["saving_vs_learned_fraction"] = (base - acc["total_bytes"]) / base
    return out


def state_report(specs: dict[str, JobSpec], overrides: list[str]) -> dict[str, Any]:
    """The state_only=true report: no model is run, nothing is allocated."""
    first = next(iter(specs.values()))
    return {"bench_version": BENCH_VERSION, "overrides": list(overrides), "model": first.model_name,
            "architecture": first.model.preset.to_dict(), "state_accounting": state_only(specs)}


# -- tables ----------------------------------------------------------------------------------------

def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _ratio(r: float | None) -> str:
    return f"{r:.2f}x" if r else "-"


def _flops_line(report: dict[str, Any]) -> str:
    """MFLOP/token: one figure when every row's model costs the same, else each row's own."""
    own = {v["name"]: v.get("flops_per_token", report["flops_per_token"]) for v in report["variants"]}
    if len(set(own.values()) | {report["flops_per_token"]}) == 1:
        return f"{report['flops_per_token'] / 1e6:.2f} MFLOP/token"
    return "MFLOP/token (each row's own model) " + ", ".join(f"{k} {f / 1e6:.2f}" for k, f in own.items())


def format_table(report: dict[str, Any]) -> str:
    cpu = report["device"]["type"] == "cpu"
    width = max([10] + [len(v["name"]) for v in report["variants"] + report.get("side_by_side", [])])
    head = (f"{'variant':<{width}} {'step ms':>9} {'tok/s':>9} {'vs HF':>6} "
            + (f"{'cpu ms':>8} " if cpu else "")
            + f"{'MFU':>6} {'compile s':>9} {'peak MiB':>9} {'state MiB':>9} {'ckpt MiB':>8} {'trainable':>12} {'loss0':>7}")
    peaks = "; ".join(f"{k.removeprefix('torch.')} {p['flops'] / 1e12:.3f} TFLOP/s ({p['source']})"
                      for k, p in report["peaks"].items())
    ref = next((v.get("reference_row") for v in report["variants"] if v.get("reference_row")), None)
    lines = [
        (f"model={report['model']} B={report['batch_size']} T={report['seq_len']} on {report['device']['type']} "
         f"({report['device']['threads']} threads); {report['steps']} timed steps over {len(report['passes'])} "
         f"pass(es), {report['warmup']} warm-up per fit, median; schedule={report['schedule']}"),
        f"step: {report['step']}",
        f"peaks (MFU denominators, per precision): {peaks}",
        (f"{_flops_line(report)}; vs HF = tokens/s over the fastest reference row"
         + (f" ({ref})" if ref else "") + f"; load avg {report['load_average']['start'][0]:.1f} -> "
         f"{report['load_average']['end'][0]:.1f}"),
        head, "-" * len(head),
    ]
    for v in report["variants"]:
        lines.append(
            f"{v['name']:<{width}} {v['step_ms_median']:>9.1f} {v['tokens_per_s']:>9,.0f} "
            f"{_ratio(v.get('tokens_per_s_vs_reference')):>6} "
            + (f"{v['step_cpu_ms_median']:>8.1f} " if cpu else "")
            + f"{100 * v['mfu']:>5.1f}% {v['compile_s']:>9.1f} {_mib(v['peak_memory_bytes']):>9} "
            f"{_mib(v['state']['total_bytes']):>9} {_mib(v['checkpoint']['total_bytes']):>8} "
            f"{v['trainable_params']:>12,} {v['first_loss']:>7.4f}"
        )
    for v in report.get("side_by_side", []):
        lines.append(f"{v['name']:<{width}} {'':>9} {v['tokens_per_s']:>9,.0f} "
                     f"{_ratio(v.get('tokens_per_s_vs_reference')):>6} " + (f"{'':>8} " if cpu else "")
                     + f"{100 * v['mfu']:>5.1f}%   ({v['threads_per_job']} thread(s) per job; aggregate tokens/s)")
    return "\n".join(lines)


def format_state(acc: dict[str, Any], model: str) -> str:
    lines = [f"AdamW fp32 training state (weights + grads + 2 moments + buffers), model={model}, meta-device build:",
             f"{'variant':<10} {'trainable':>14} {'state MiB':>12} {'saving MiB':>11} {'saving':>7}"]
    for name, a in acc.items():
        lines.append(f"{name:<10} {a['trainable_params']:>14,} {_mib(a['total_bytes']):>12} "
                     f"{_mib(a.get('saving_vs_learned_bytes', 0)):>11} "
                     f"{100 * a.get('saving_vs_learned_fraction', 0):>6.2f}%")
    return "\n".join(lines)
