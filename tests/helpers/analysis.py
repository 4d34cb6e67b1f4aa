"""Synthetic run directories that follow docs/results-schema.md exactly, with known numbers, for analysis tests.

Also usable by hand to time the report:  python tests/helpers/analysis.py /tmp/runs
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

VOCAB = 4096
D_MODEL = 64
BODY = 10_000
HEAD = VOCAB * D_MODEL  # untied output head
LEARNED_INPUT = VOCAB * D_MODEL

# Final metrics per (input, seed): the numbers the tests check against.
VAL_PPL = {"learned": [60.0, 61.0, 62.0], "binary16": [64.0, 65.0, 66.5], "gf2": [60.5, 61.5, 61.0]}
VAL_BPB = {"learned": [1.90, 1.91, 1.92], "binary16": [1.95, 1.97, 1.96], "gf2": [1.91, 1.90, 1.93]}
HELLASWAG = {"learned": [0.26, 0.27, 0.28], "binary16": [0.25, 0.26, 0.255], "gf2": [0.30, 0.31, 0.32]}
HELLASWAG_STDERR = 0.004
UNIGRAM_PPL = 520.0
SEEDS = [1, 2, 3]


def md_rows(path: Path) -> list[list[str]]:
    """A markdown table's body rows as cell lists (its header and alignment rows dropped)."""
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]


def input_props(name: str, code_width: int | None = None) -> dict:
    if name == "learned":
        return {"type": "learned"}
    width = code_width or 16
    props = {"type": name, "code_width": width, "tile_factor": D_MODEL // width, "values": "{0,1}",
             "scale": 1.0, "injective": True, "truncated": False}
    if name == "gf2":
        props |= {"matrix_seed": 12345, "min_weight": 4, "affine": False, "matrix_sha256": "ab" * 32,
                  "gf2_rank": width}
    return props


def params_for(name: str, body: int = BODY) -> dict:
    input_trainable = LEARNED_INPUT if name == "learned" else 0
    total = body + HEAD + input_trainable
    return {"total": total, "trainable": total, "input_trainable": input_trainable, "body": body, "head": HEAD}


def write_metrics_csv(job_dir: Path, final_ppl: float, steps: int = 200, val_every: int = 50,
                      tokens_per_step: int = 2048) -> None:
    """Long metrics.csv: train/* every 10 steps, val/* every val_every steps and at the end."""
    lines = ["step,tokens,metric,value"]
    rng = np.random.default_rng(int(final_ppl * 100))
    for step in range(10, steps + 1, 10):
        tokens = step * tokens_per_step
        loss = np.log(final_ppl) + 3.0 * np.exp(-step / 40) + rng.normal(0, 0.05)
        lines += [f"{step},{tokens},train/loss,{loss:.6f}", f"{step},{tokens},train/lr,0.001",
                  f"{step},{tokens},train/tokens_per_second,12000.0"]
        if step % val_every == 0 or step == steps:
            ppl = final_ppl * float(np.exp(2.5 * np.exp(-step / 40))) if step != steps else final_ppl
            lines += [f"{step},{tokens},val/loss,{np.log(ppl):.6f}", f"{step},{tokens},val/ppl,{ppl:.6f}",
                      f"{step},{tokens},val/bpb,{np.log2(ppl) / 4:.6f}"]
    (job_dir / "metrics.csv").write_text("\n".join(lines) + "\n")


def write_job(sweep_dir: Path, name: str, seed: int, *, status: str = "completed", error: str | None = None,
              val_ppl: float | None = None, val_bpb: float | None = None, hellaswag: float | None = None,
              hellaswag_stderr: float | None = None, model: str = "cpu_tiny", code_width: int | None = None,
              extra_key: str = "", curves: bool = True, body: int = BODY, crn: bool = False,
              final_extra: dict | None = None, props_extra: dict | None = None, config_extra: dict | None = None,
              results_extra: dict | None = None) -> Path:
    """One job directory. crn=True records common random numbers (init.scheme = per_group_generators);
    the *_extra dicts are merged into final, input_props, config and the top level of results.json."""
    job_key = f"input={name}{extra_key},seed={seed}"
    job_dir = sweep_dir / job_key
    (job_dir / ".hydra").mkdir(parents=True)
    props = input_props(name, code_width) | (props_extra or {})
    final = None if val_ppl is None else {"val_loss": float(np.log(val_ppl)), "val_ppl": val_ppl, "val_bpb": val_bpb}
    if final is not None and final_extra:
        final |= final_extra
    results = {
        "schema_version": 1, "status": status, "error": error, "sweep": sweep_dir.name, "job_key": job_key,
        "input": name, "input_props": props, "seed": seed, "model": model,
        "code_width": props.get("code_width"), "params": params_for(name, body), "final": final,
        "data": {"name": "shakespeare", "vocab_size": VOCAB, "train_tokens": 1_200_000, "val_tokens": 40_000,
                 "val_bytes": 150_000, "unigram_val_ppl": UNIGRAM_PPL, "cache_key": "k"},
        "tokens_seen": 409_600, "train_seconds": 40.2, "tokens_per_second": 13000.0,
        "overrides": [f"input={name}", f"seed={seed}"],
        "config": {"seed": seed, "input": {"name": name, **{k: v for k, v in props.items() if k != "type"}},
                   "model": {"name": model, "d_model": D_MODEL}, "train": {"lr": 0.001},
                   "hydra": {"run": {"dir": str(job_dir)}}},
        "checkpoint": "checkpoints/final",
        "versions": {"torch": "2.5.0", "lightning": "2.4.0", "fixedcode_study": "0.1.0"},
    }
    if crn:
        results["init"] = {"scheme": "per_group_generators", "seed": seed}
    for key, value in (config_extra or {}).items():
        results["config"][key] = results["config"].get(key, {}) | value if isinstance(value, dict) else value
    results |= results_extra or {}
    if hellaswag is not None:
        task = {"acc_norm": hellaswag}
        if hellaswag_stderr is not None:
            task["acc_norm_stderr"] = hellaswag_stderr
        results["eval"] = {"lm_eval_version": "0.4.13", "tasks": {"hellaswag": task}}
    (job_dir / "results.json").write_text(json.dumps(results, indent=2))
    if curves and val_ppl is not None:
        write_metrics_csv(job_dir, val_ppl)
    return job_dir


def build_main_sweep(root: Path) -> Path:
    """learned/binary16/gf2 x 3 seeds (with lm-eval), one failed, one running, one crashed before results.json."""
    sweep = root / "multirun" / "main"
    for name in ("learned", "binary16", "gf2"):
        for i, seed in enumerate(SEEDS):
            write_job(sweep, name, seed, val_ppl=VAL_PPL[name][i], val_bpb=VAL_BPB[name][i],
                      hellaswag=HELLASWAG[name][i], hellaswag_stderr=HELLASWAG_STDERR)
    write_job(sweep, "gf2", 4, status="failed", error="RuntimeError: CUDA out of memory")
    write_job(sweep, "binary16", 4, status="running")
    (sweep / "input=learned,seed=4" / ".hydra").mkdir(parents=True)
    return sweep


def build_single_seed(root: Path) -> Path:
    """n = 1 per variant with lm-eval stderr: cells must show value ± stderr, diffs n/a."""
    sweep = root / "multirun" / "single"
    write_job(sweep, "learned", 0, val_ppl=60.0, val_bpb=1.9, hellaswag=0.26, hellaswag_stderr=0.004)
    write_job(sweep, "gf2", 0, val_ppl=61.0, val_bpb=1.92, hellaswag=0.27, hellaswag_stderr=0.0045)
    return sweep


def build_width_sweep(root: Path) -> Path:
    """gf2 at code widths 8/16/32 (2 seeds) plus learned: a numeric axis that varies."""
    sweep = root / "multirun" / "width"
    for seed in (1, 2):
        write_job(sweep, "learned", seed, val_ppl=60.0 + seed, val_bpb=1.9, curves=False)
        for width, ppl in ((8, 70.0), (16, 64.0), (32, 61.0)):
            write_job(sweep, "gf2", seed, val_ppl=ppl + seed, val_bpb=1.95, code_width=width,
                      extra_key=f",input.code_width={width}", curves=False)
    return sweep


def build_model_sweep(root: Path) -> Path:
    """learned and gf2 on two model presets of different size (2 seeds each)."""
    sweep = root / "multirun" / "models"
    for model, body, offset in (("cpu_small", 4 * BODY, 10.0), ("cpu_tiny", BODY, 0.0)):
        for seed in (1, 2):
            for name, ppl in (("learned", 60.0), ("gf2", 61.0)):
                write_job(sweep, name, seed, val_ppl=ppl - offset + seed, val_bpb=1.9 + 0.01 * seed, model=model,
                          body=body, extra_key=f",model={model}", curves=False)
    return sweep


def build_width_and_scale_sweep(root: Path) -> Path:
    """gf2 code widths 8/16/32 at scale 1, plus scales 0.5/2 at width 16 (2 seeds), plus learned."""
    sweep = root / "multirun" / "mixed"
    for seed in (1, 2):
        write_job(sweep, "learned", seed, val_ppl=60.0 + seed, val_bpb=1.9, curves=False)
        for width in (8, 16, 32):
            write_job(sweep, "gf2", seed, val_ppl=70 - width / 4 + seed, val_bpb=1.95, code_width=width,
                      extra_key=f",input.code_width={width}", curves=False)
        for scale in (0.5, 2.0):
            job = write_job(sweep, "gf2", seed, val_ppl=65 + scale + seed, val_bpb=1.95,
                            extra_key=f",input.scale={scale}", curves=False)
            results = json.loads((job / "results.json").read_text())
            results["input_props"]["scale"] = scale
            (job / "results.json").write_text(json.dumps(results))
    return sweep


# ------------------------------------------------------------------ issue 12 studies


def write_curve_csv(job_dir: Path, bpb_at: dict[int, float], tokens_per_step: int = 2048) -> None:
    """metrics.csv with val/bpb (and val/ppl, val/loss derived from it) at exactly the given steps."""
    lines = ["step,tokens,metric,value"]
    for step, bpb in sorted(bpb_at.items()):
        loss = bpb * 4 * np.log(2)  # the synthetic data set has 4 bytes per token
        lines += [f"{step},{step * tokens_per_step},val/loss,{loss:.9f}",
                  f"{step},{step * tokens_per_step},val/ppl,{np.exp(loss):.9f}",
                  f"{step},{step * tokens_per_step},val/bpb,{bpb:.9f}"]
    (job_dir / "metrics.csv").write_text("\n".join(lines) + "\n")


LOG_STEPS = sorted({round(float(s)) for s in np.geomspace(8, 1024, 13)})  # 13 log-spaced validation steps
CRN_SEEDS = [1, 2, 3, 4]
SEED_EFFECT = {1: 0.00, 2: 0.06, 3: -0.04, 4: 0.03}       # shared by every variant at a seed (CRN)
SHIFT = {"learned": 0.0, "binary16": 0.05, "gf2": 0.052}   # variant - learned, bits/byte
WOBBLE = {(1, "binary16"): 0.002, (2, "binary16"): -0.001, (3, "binary16"): 0.0, (4, "binary16"): -0.001,
          (1, "gf2"): -0.001, (2, "gf2"): 0.001, (3, "gf2"): 0.002, (4, "gf2"): -0.002}


def crn_bpb(name: str, seed: int, step: int | None = None) -> float:
    """bpb of a CRN run: learning curve + seed effect (shared) + variant shift + small per-run wobble."""
    curve = 0.0 if step is None else 2.0 * np.exp(-step / 200)
    return 1.9 + curve + SEED_EFFECT[seed] + SHIFT[name] + WOBBLE.get((seed, name), 0.0)


def build_crn_sweep(root: Path, crn: bool = True, drop_step: int | None = LOG_STEPS[5]) -> Path:
    """learned/binary16/gf2 x 4 seeds with common random numbers; log-spaced validation steps;
    seed 2 of gf2 misses one step (drop_step), so the gap is only drawn where every pair has it."""
    sweep = root / "multirun" / "crn"
    for name in ("learned", "binary16", "gf2"):
        for seed in CRN_SEEDS:
            bpb = crn_bpb(name, seed)
            job = write_job(sweep, name, seed, val_ppl=float(np.exp(bpb * 4 * np.log(2))), val_bpb=bpb, curves=False,
                            crn=crn)
            steps = {s: crn_bpb(name, seed, s) for s in LOG_STEPS if not (name == "gf2" and seed == 2 and s == drop_step)}
            steps[LOG_STEPS[-1]] = bpb  # the last validation is the final value
            write_curve_csv(job, steps)
    return sweep


CONTROL_INPUTS = ["learned", "binary16", "binary16_permuted", "gaussian16", "frozen_learned", "learned_lowdim",
                  "binary16_sizematched", "gf2_sizematched", "binary16_sizematched_isoflop", "gf2_sizematched_isoflop"]


def build_controls_sweep(root: Path) -> Path:
    """The controls study's 10 arms (sweeps/controls.yaml) x 2 seeds, with curves; listed here in a
    different order than the report must use, so the test sees the ordering happen."""
    sweep = root / "multirun" / "controls"
    for i, name in sorted(enumerate(CONTROL_INPUTS), key=lambda item: item[1]):
        for seed in (1, 2):
            write_job(sweep, name, seed, val_ppl=60.0 + 2 * i + seed, val_bpb=1.9 + 0.01 * i + 0.002 * seed)
    return sweep


MATRIX_SEEDS = [12345, 1, 2, 3, 4]


def build_matrix_sweep(root: Path, matrix_effect: dict[int, float], seed_effect: dict[int, float],
                       noise: dict[tuple[int, int], float]) -> Path:
    """gf2 matrix seeds x run seeds (one job each) with bpb = 1.9 + matrix + seed + noise; plus a
    min_weight=8 arm and binary16 as in sweeps/gf2_matrices."""
    sweep = root / "multirun" / "gf2_matrices"
    for m, m_effect in matrix_effect.items():
        for s, s_effect in seed_effect.items():
            bpb = 1.9 + m_effect + s_effect + noise[(m, s)]
            write_job(sweep, "gf2", s, val_ppl=float(np.exp(bpb * 4 * np.log(2))), val_bpb=bpb, curves=False, crn=True,
                      extra_key=f",input.matrix_seed={m}", props_extra={"matrix_seed": m})
    for s in seed_effect:
        write_job(sweep, "gf2", s, val_ppl=70.0, val_bpb=1.95, curves=False, crn=True,
                  extra_key=",input.min_weight=8", props_extra={"min_weight": 8})
        write_job(sweep, "binary16", s, val_ppl=71.0, val_bpb=1.96, curves=False, crn=True)
    return sweep


LRS = [0.001, 0.003, 0.01]
# select / report loss per (input, lr): the best lr differs by input
TUNED_LOSS = {("learned", 0.001): 3.30, ("learned", 0.003): 3.20, ("learned", 0.01): 3.40,
              ("binary16", 0.001): 3.45, ("binary16", 0.003): 3.35, ("binary16", 0.01): 3.30,
              ("gf2", 0.001): 3.36, ("gf2", 0.003): 3.31, ("gf2", 0.01): 3.50}


def build_tuned_sweep(root: Path, split: bool = True) -> Path:
    """learned/binary16/gf2 x lr {1e-3, 3e-3, 1e-2} x 3 seeds (CRN), with val_loss_select and a
    report half that is 0.01 higher plus a small seed wobble."""
    sweep = root / "multirun" / "tuned_lr"
    for (name, lr), loss in TUNED_LOSS.items():
        for seed in SEEDS:
            select = loss + 0.01 * (seed - 2) + 0.002 * ((seed + len(name)) % 3)
            report = select + 0.01 + 0.001 * ((seed * len(name)) % 4)
            extra = {"val_loss_select": select, "val_loss_report": report, "val_bpb_report": report / (4 * np.log(2))}
            write_job(sweep, name, seed, val_ppl=float(np.exp(select)), val_bpb=select / (4 * np.log(2)), curves=False,
                      crn=True, extra_key=f",optim.lr={lr}", final_extra=extra if split else None,
                      config_extra={"optim": {"lr": lr, "warmup_fraction": 0.05}})
    return sweep


def code_props(name: str) -> dict:
    """Code properties as the training side records them (binary16 at V=4096: bits 12-15 constant)."""
    if name == "learned":
        return {}
    constant = [12, 13, 14, 15] if name == "binary16" else []
    return {"vocab_size": VOCAB, "nonconstant_bits": 16 - len(constant), "constant_bits": constant,
            "bit_entropy_mean": 0.75 if constant else 0.98, "bit_entropy_min": 0.0 if constant else 0.9,
            "hamming_min": 1, "hamming_mean": 6.0 if constant else 8.0, "code_rms": 0.61}


def build_model_flops_sweep(root: Path) -> Path:
    """learned/binary16/gf2 on two model presets (3 CRN seeds), recording flops_per_token."""
    sweep = root / "multirun" / "model_size"
    for model, body, flops, gap in (("cpu_tiny", BODY, 1.0e7, 0.08), ("cpu_30m", 8 * BODY, 2.0e8, 0.04)):
        for seed in SEEDS:
            for name in ("learned", "binary16", "gf2"):
                bpb = 1.9 + 0.01 * seed + (gap + 0.002 * seed * (name == "gf2") if name != "learned" else 0.0)
                write_job(sweep, name, seed, val_ppl=float(np.exp(bpb * 4 * np.log(2))), val_bpb=bpb, model=model,
                          body=body, extra_key=f",model={model}", curves=False, crn=True,
                          results_extra={"flops_per_token": {"dense_6N": flops, "attention": 0, "total": flops}})
    return sweep


# ------------------------------------------------------------------ the loss breakdown (issue 40)

# 1,000 validation tokens, each with its bucket in every breakdown: the same buckets in every run for
# a common partition (the id's binary16 weight, the position), each code's own for its own-code weight
# (gf2's buckets hold other tokens than binary16's). The first id-weight bucket is below 100 tokens.
ID_WEIGHT_TOKENS = [40, 300, 400, 260]
POSITION_TOKENS = [200, 300, 500]
GF2_OWN_TOKENS = [5, 180, 640, 175]
BREAKDOWN_LEVEL = {"learned": 4.00, "binary16": 4.30, "gf2": 4.25}


def _buckets(counts: list[int], stride: int) -> np.ndarray:
    """Bucket of each of the sum(counts) tokens, the tokens taken in the order i * stride mod T."""
    total = sum(counts)
    order = (np.arange(total) * stride) % total
    edges = np.cumsum(counts)
    return np.searchsorted(edges, order, side="right")


def token_losses(name: str, seed: int) -> np.ndarray:
    """Per-token loss: the arm's level, a seed effect shared by every arm (CRN), for the fixed codes a
    gap that grows with the id's weight and the position, and a small per-run wobble."""
    idw, pos = _buckets(ID_WEIGHT_TOKENS, 1), _buckets(POSITION_TOKENS, 7)
    gap = (0.05 * idw + 0.02 * pos) if name != "learned" else 0.0
    wobble = np.random.default_rng([seed, len(name), ord(name[0])]).normal(0.0, 0.05, idw.size)
    return BREAKDOWN_LEVEL[name] + 0.04 * seed + gap + wobble


def _block(name: str, buckets: np.ndarray, losses: np.ndarray, kind: str) -> dict:
    n = int(buckets.max()) + 1
    tokens = np.bincount(buckets, minlength=n)
    return {"of": "position" if name == "position" else "input", "kind": kind, "definition": name,
            "lower": list(range(n)), "upper": list(range(n)), "labels": [str(i) for i in range(n)],
            "nats": np.bincount(buckets, weights=losses, minlength=n).tolist(), "tokens": tokens.tolist(),
            "bytes": (4 * tokens).tolist()}


def val_breakdown(name: str, seed: int) -> dict:
    losses = token_losses(name, seed)
    breakdowns = {"input_id_weight": _block("input_id_weight", _buckets(ID_WEIGHT_TOKENS, 1), losses, "weight"),
                  "position": _block("position", _buckets(POSITION_TOKENS, 7), losses, "log2")}
    if name != "learned":
        own = _buckets(ID_WEIGHT_TOKENS, 1) if name == "binary16" else _buckets(GF2_OWN_TOKENS, 13)
        breakdowns["input_code_weight"] = _block("input_code_weight", own, losses, "weight")
    return {"step": 100, "total": {"nats": float(losses.sum()), "tokens": int(losses.size), "bytes": 4 * int(losses.size)},
            "train_counts": {"counted_tokens": 1000, "train_tokens": 1000, "source": "all tokens"},
            "breakdowns": breakdowns}


def build_breakdown_sweep(root: Path, name: str = "main") -> Path:
    """learned/binary16/gf2 x seeds 1-3 (CRN) recording a loss breakdown; final val loss is the total's."""
    sweep = root / "multirun" / name
    for arm in ("learned", "binary16", "gf2"):
        for seed in SEEDS:
            block = val_breakdown(arm, seed)
            loss = block["total"]["nats"] / block["total"]["tokens"]
            write_job(sweep, arm, seed, val_ppl=float(np.exp(loss)), val_bpb=float(loss / np.log(2) / 4), crn=True,
                      curves=False, final_extra={"val_loss": loss}, results_extra={"val_breakdown": block})
    return sweep


if __name__ == "__main__":
    print(build_main_sweep(Path(sys.argv[1])))
