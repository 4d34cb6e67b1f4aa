"""The README's first command as a new user meets it: a fresh clone, empty caches, one wall clock.

    python benchmarks/first_command.py                   # a fresh clone of this checkout's HEAD, cold
    python benchmarks/first_command.py --warm            # then the same clone again, caches kept
    python benchmarks/first_command.py --keep DIR        # leave the clone and its outputs in DIR

Cold means what a new machine has: a `git clone` of HEAD (committed files only), and empty folders
for the token cache (FIXEDCODE_CACHE), torch inductor's on-disk cache (TORCHINDUCTOR_CACHE_DIR), the
temp folder (TMPDIR: inductor's precompiled C++ header lives there, outside its cache folder), W&B
and Hugging Face. The installed packages are reused (the install is timed on its own: README). The
command is the README's, run from the clone's root exactly as written:

    python -m fixedcode_study.run -m input=learned,binary16,gf2 seed=1,2,3

Prints the wall time and where it went, from the jobs' own records: data preparation (start to the
first job's start), each job's wall (results.json started_at -> finished_at), its training seconds
(train_seconds: the optimizer steps alone), the rest of its fit (wall_seconds - train_seconds: the
validations, checkpoints and the loop's own cost), the throughput over its first 8 steps (the cold
compile shows there) and at its end. Run it on a quiet machine: nothing else may load the cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "fixedcode_study.run", "-m", "input=learned,binary16,gf2", "seed=1,2,3"]
CACHE_VARS = {"FIXEDCODE_CACHE": "fixedcode_cache", "TORCHINDUCTOR_CACHE_DIR": "inductor",
              "TRITON_CACHE_DIR": "triton", "WANDB_DIR": "wandb", "WANDB_CACHE_DIR": "wandb_cache",
              "WANDB_CONFIG_DIR": "wandb_config", "WANDB_DATA_DIR": "wandb_data", "HF_HOME": "hf_home",
              "XDG_CACHE_HOME": "xdg_cache", "MPLCONFIGDIR": "matplotlib",
              # Inductor keeps its precompiled C++ header (~150 MB, built once per machine) under the temp
              # folder, not TORCHINDUCTOR_CACHE_DIR (torch/_inductor/codecache.py _HEADER_DIR): a run that
              # only emptied the inductor cache still found the header an earlier run had built.
              "TMPDIR": "tmp"}


def _cpu() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
    return f"{name}, {os.cpu_count()} logical CPUs, {'with' if bf16 else 'without'} bf16 instructions"


def _when(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def _tokens_per_second_at(metrics: Path, step: int) -> float | None:
    with metrics.open() as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == "train/tokens_per_second"]
    at = [float(r["value"]) for r in rows if int(r["step"]) == step]
    return at[0] if at else None


def run_once(clone: Path, env: dict[str, str], label: str) -> dict:
    start = time.time()
    done = subprocess.run(COMMAND, cwd=clone, env=env, capture_output=True, text=True)
    wall = time.time() - start
    (clone / f"first_command_{label}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"error: the command exited {done.returncode}; its output is in {clone}/first_command_{label}.log")
    jobs = []
    for results in sorted((clone / "outputs" / "multirun" / "main").glob("*/results.json")):
        record = json.loads(results.read_text())
        metrics = results.parent / "metrics.csv"
        jobs.append({"job": results.parent.name, "status": record["status"],
                     "started": _when(record["started_at"]) - start, "finished": _when(record["finished_at"]) - start,
                     "train_seconds": record["train_seconds"], "fit_seconds": record["wall_seconds"],
                     "tokens_per_second_step8": _tokens_per_second_at(metrics, 8),
                     "tokens_per_second": record["tokens_per_second"], "compile": record["runtime"]["compile"],
                     "precision": record["runtime"]["precision"], "threads": record["runtime"]["threads"]})
    return {"label": label, "wall": wall, "jobs": jobs}


def report(run: dict) -> str:
    jobs = sorted(run["jobs"], key=lambda j: j["started"])
    first = jobs[0]
    lines = [f"{run['label']}: {run['wall']:.0f} s wall, {len(jobs)} jobs "
             f"({sum(j['status'] == 'completed' for j in jobs)} completed; {first['precision']}, "
             f"compile={first['compile']}, {first['threads']} thread(s) each)",
             f"  start to the first job's start (imports, data preparation, launcher): {first['started']:.0f} s",
             f"  {'job':28s} {'start':>6s} {'wall':>6s} {'train':>6s} {'fit-train':>9s} {'tok/s@8':>8s} {'tok/s':>7s}"]
    for j in jobs:
        step8 = f"{j['tokens_per_second_step8']:.0f}" if j["tokens_per_second_step8"] else "-"
        lines.append(f"  {j['job']:28s} {j['started']:6.0f} {j['finished'] - j['started']:6.0f} "
                     f"{j['train_seconds']:6.1f} {j['fit_seconds'] - j['train_seconds']:9.1f} {step8:>8s} "
                     f"{j['tokens_per_second']:7.0f}")
    lines.append(f"  last job finished at {max(j['finished'] for j in jobs):.0f} s; the command ended at "
                 f"{run['wall']:.0f} s (timestamps are whole seconds)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="after the cold run, run again with the caches kept")
    parser.add_argument("--keep", type=Path, help="make the clone and caches here and leave them")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="first-command-"))
    base.mkdir(parents=True, exist_ok=True)
    clone = base / "fixedcode-study"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "FIXEDCODE_"))}
    for var, folder in CACHE_VARS.items():
        (base / "caches" / folder).mkdir(parents=True, exist_ok=True)
        env[var] = str(base / "caches" / folder)
    env["PYTHONPATH"] = str(clone)  # the clone's code, whatever the installed copy is
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    print(f"# {' '.join(['python', *COMMAND[1:]])}\n# commit {head}; {_cpu()}; torch "
          f"{__import__('torch').__version__}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    runs = [run_once(clone, env, "cold")]
    print(report(runs[-1]), flush=True)
    if args.warm:
        subprocess.run(["rm", "-rf", str(clone / "outputs")], check=True)  # retrain, with the caches kept
        runs.append(run_once(clone, env, "warm"))
        print(report(runs[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"commit": head, "cpu": _cpu(), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
