"""`python -m fixedcode_study.bench [options] [hydra overrides]`: systems cost of each input interface.

Training step time (a Lightning Trainer.fit of the same LanguageModelTask and optimizer that `run`
uses), peak memory, training-state bytes, checkpoint size and MFU per input variant, against Hugging
Face's LlamaForCausalLM with the same weights; what is measured and how: systems/bench.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from hydra.errors import HydraException
from omegaconf import DictConfig

from ..config import compose
from ..errors import ConfigError
from ..record import atomic
from ..systems import bench
from ..systems.bench import DEFAULT_INPUTS

EXAMPLES = """examples:
  python -m fixedcode_study.bench                                   # cpu_tiny, all three inputs + HF
  python -m fixedcode_study.bench model=cpu_30m --steps 8
  python -m fixedcode_study.bench --inputs learned --settings all --jobs 2   # eager/compiled x fp32/bf16 vs HF
  python -m fixedcode_study.bench model=paper_1p7b --state-only      # AdamW state accounting (meta)
  python -m fixedcode_study.bench model=paper_1p7b train.batch_size=4 train.seq_len=2048  # on a GPU
Options come before or after the overrides; everything that is not an option is a Hydra override."""


def default_json_path(cfg: DictConfig, device: str, state_only_mode: bool) -> Path:
    kind = "state" if state_only_mode else device
    return Path(str(cfg.out_root)) / "bench" / f"bench-{cfg.model.name}-{kind}.json"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m fixedcode_study.bench", description=__doc__.split("\n")[0],
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", default=",".join(DEFAULT_INPUTS), help="comma-separated conf/input names")
    p.add_argument("--steps", type=int, default=10, help="timed steps per model (median reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps at the start of every fit")
    p.add_argument("--memory-steps", type=int, default=2, help="steps per model in the peak-memory pass")
    p.add_argument("--no-reference", action="store_true", help="skip the HF LlamaForCausalLM reference")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--schedule", default="auto", choices=["auto", "abba", "interleaved", "sequential"],
                   help="abba (default; 'interleaved' is its former name): the timed steps split over a pass "
                        "through the models and a reversed pass; sequential: one pass")
    p.add_argument("--settings", default="default",
                   help="how each model runs: default (what `run` uses), all, or a list of fp32, fp32_compiled, "
                        "bf16, bf16_compiled")
    p.add_argument("--jobs", type=int, default=1, help="CPU: also time N jobs side by side (cores/N threads each)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for CPU runs")
    p.add_argument("--state-only", action="store_true", help="only the meta-device AdamW state accounting")
    p.add_argument("--json", default=None, help="output path (default ${out_root}/bench/bench-<model>-<device>.json)")
    return p.parse_known_args(argv)


def main(argv: list[str] | None = None) -> None:
    args, overrides = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        unknown = [o for o in overrides if o.startswith("--")]
        if unknown:
            raise ConfigError(unknown[0], "not an option of the benchmark", "see python -m fixedcode_study.bench --help")
        if args.threads:
            torch.set_num_threads(args.threads)
        inputs = [s for s in args.inputs.split(",") if s]
        if not inputs:
            raise ConfigError("--inputs", "no input variant given", f"use e.g. --inputs {','.join(DEFAULT_INPUTS)}")
        if args.state_only:
            report = bench.state_report(overrides, inputs)
        else:
            report = bench.run_bench(overrides, inputs=inputs, steps=args.steps, warmup=args.warmup,
                                     reference=not args.no_reference, device_arg=args.device,
                                     schedule=args.schedule, memory_steps=args.memory_steps,
                                     settings=args.settings, jobs=args.jobs)
            print(bench.format_table(report))
        print(bench.format_state(report["state_accounting"], report["model"]))
        device = report.get("device", {}).get("type", "cpu")
        out = Path(args.json) if args.json else default_json_path(compose(overrides), device, args.state_only)
        atomic.write_json(out, report)  # never a half-written report under the final name
        print(f"wrote {out}")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except HydraException as err:  # unknown preset or malformed override
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"error: overrides: {first_line}; see conf/ for the groups and keys", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
