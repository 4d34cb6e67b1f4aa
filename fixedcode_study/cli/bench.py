"""`fixedcode bench [settings] [hydra overrides]`: systems cost of each input interface.

Training step time (a Lightning Trainer.fit of the same LanguageModelTask and optimizer that `run`
uses), peak memory, training-state bytes, checkpoint size and MFU per input variant, against Hugging
Face's LlamaForCausalLM with the same weights; what is measured and how: systems/bench.py.
Also `python -m fixedcode_study.bench`.

examples:
  python -m fixedcode_study.bench                                   # cpu_tiny, all three inputs + HF
  python -m fixedcode_study.bench model=cpu_30m --steps 8
  python -m fixedcode_study.bench --inputs learned --settings all --jobs 2   # eager/compiled x fp32/bf16 vs HF
  python -m fixedcode_study.bench model=paper_1p7b --state-only      # AdamW state accounting (meta)
  python -m fixedcode_study.bench model=paper_1p7b train.batch_size=4 train.seq_len=2048  # on a GPU
Settings come before or after the overrides; `input=NAME` benchmarks that one variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import compose_variant
from ..errors import ConfigError
from .args import Command, Key, exit_with, run_command

DEFAULT_INPUTS = "learned,binary16,gf2"

COMMAND = Command("bench", __doc__, overrides=True, keys=(
    Key("inputs", DEFAULT_INPUTS, "comma-separated conf/input names", flag="--inputs"),
    Key("steps", 10, "timed steps per model (median reported)", flag="--steps"),
    Key("warmup", 2, "untimed steps at the start of every fit", flag="--warmup"),
    Key("memory_steps", 2, "steps per model in the peak-memory pass", flag="--memory-steps"),
    Key("no_reference", False, "skip the HF LlamaForCausalLM reference", flag="--no-reference"),
    Key("device", "auto", "where the models run", flag="--device", choices=("auto", "cpu", "cuda")),
    Key("schedule", "auto", "auto = abba (also 'interleaved'): steps split over a pass and a reversed pass; "
        "sequential: one pass", flag="--schedule",
        choices=("auto", "abba", "interleaved", "sequential")),
    Key("settings", "default", "default (what `run` uses), all, or of fp32,fp32_compiled,bf16,bf16_compiled; "
        "fp32_compiled_input and bf16_compiled_input compile the input layer too (not bitwise at 2+ threads)",
        flag="--settings"),
    Key("jobs", 1, "CPU: also time N jobs side by side (cores/N threads each)", flag="--jobs"),
    Key("threads", None, "torch.set_num_threads for CPU runs", flag="--threads", kind=int),
    Key("state_only", False, "only the meta-device AdamW state accounting", flag="--state-only"),
    Key("json", None, "output path (default ${out_root}/bench/bench-<model>-<device>.json)", flag="--json", kind=str),
))


def variant_spec(overrides: Sequence[str], name: str) -> Any:
    """The job of these overrides with input variant `name`, composed and resolved (a JobSpec)."""
    from ..spec import JobSpec  # the model stack loads only when a bench runs: --help stays instant

    return JobSpec.from_cfg(compose_variant(overrides, name))


def variant_specs(overrides: Sequence[str], inputs: Sequence[str]) -> dict[str, Any]:
    """One job per input variant; an `input=` override picks the single variant."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith("input=")]
    return {name: variant_spec(overrides, name) for name in (chosen or inputs)}


def default_json_path(spec: Any, device: str, state_only_mode: bool) -> Path:
    kind = "state" if state_only_mode else device
    return Path(spec.out_root) / "bench" / f"bench-{spec.model_name}-{kind}.json"


def bench(values: dict[str, Any], overrides: list[str]) -> int:
    import torch  # the measuring stack loads only when a bench runs: --help and a bad key stay instant

    from ..record import atomic
    from ..systems.bench import BenchOptions, run_bench
    from ..systems.bench_report import format_state, format_table, state_report

    if values["threads"]:
        torch.set_num_threads(values["threads"])
    inputs = [s for s in values["inputs"].split(",") if s]
    if not inputs:
        raise ConfigError("inputs", "no input variant given", f"pass e.g. inputs={DEFAULT_INPUTS}")
    options = None if values["state_only"] else BenchOptions(
        steps=values["steps"], warmup=values["warmup"], memory_steps=values["memory_steps"],
        reference=not values["no_reference"], device=values["device"], schedule=values["schedule"],
        settings=values["settings"], jobs=values["jobs"])  # checked before anything is composed or built
    specs = variant_specs(overrides, inputs)
    if options is None:
        report = state_report(specs, overrides)
    else:
        reference = None if not options.reference else \
            specs["learned"] if "learned" in specs else variant_spec(overrides, "learned")
        report = run_bench(specs, options, reference_spec=reference, overrides=overrides)
        print(format_table(report))
    print(format_state(report["state_accounting"], report["model"]))
    device = report.get("device", {}).get("type", "cpu")
    out = Path(values["json"]) if values["json"] else default_json_path(next(iter(specs.values())), device,
                                                                        values["state_only"])
    atomic.write_json(out, report)  # never a half-written report under the final name
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench)


if __name__ == "__main__":
    exit_with(main())
