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
              extra_key: str = "", curves: bool = True, body: int = BODY) -> Path:
    job_key = f"input={name}{extra_key},seed={seed}"
    job_dir = sweep_dir / job_key
    (job_dir / ".hydra").mkdir(parents=True)
    props = input_props(name, code_width)
    final = None if val_ppl is None else {"val_loss": float(np.log(val_ppl)), "val_ppl": val_ppl, "val_bpb": val_bpb}
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


if __name__ == "__main__":
    print(build_main_sweep(Path(sys.argv[1])))
