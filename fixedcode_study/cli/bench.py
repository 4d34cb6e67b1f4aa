"""`fixedcode bench [settings] [hydra overrides]`: systems cost of each input interface.

Training step time (a Lightning Trainer.fit of the same LanguageModelTask and optimizer that `run`
uses), peak memory, training-state bytes, checkpoint size and MFU per input variant, against Hugging
Face's LlamaForCausalLM with the same weights; what is measured and how: systems/bench.py.

examples:
  fixedcode bench                                             # cpu_tiny, all three inputs + HF
  fixedcode bench model=cpu_30m steps=8
  fixedcode bench inputs=learned settings=all                 # eager/compiled x fp32/bf16 vs HF
  fixedcode bench model=paper_1p7b state_only=true            # AdamW state accounting (meta)
  fixedcode bench model=paper_1p7b train.batch_size=4 train.seq_len=2048  # on a GPU
Settings come before or after the overrides; `input=NAME` benchmarks that one variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import compose_variant
from ..errors import ConfigError
from ..systems.options import BenchOptions
from .args import Command, exit_with, run_command

DEFAULT_INPUTS = "learned,binary16,gf2"


@dataclass(frozen=True, kw_only=True)
class BenchCommandOptions:
    inputs: str = DEFAULT_INPUTS
    """comma-separated conf/input names"""
    bench: BenchOptions = field(default_factory=BenchOptions)
    threads: int | None = None
    """torch.set_num_threads for CPU runs"""
    state_only: bool = False
    """only the meta-device AdamW state accounting"""
    json: str | None = None
    """output path (default ${out_root}/bench/bench-<model>-<device>.json)"""

    def __post_init__(self) -> None:
        if not self.input_names:
            raise ConfigError("inputs", "no input variant given", f"pass e.g. inputs={DEFAULT_INPUTS}")

    @property
    def input_names(self) -> list[str]:
        return [s for s in self.inputs.split(",") if s]


COMMAND = Command("bench", __doc__, BenchCommandOptions, overrides=True)


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


def bench(options: BenchCommandOptions, overrides: list[str]) -> int:
    import torch  # the measuring stack loads only when a bench runs: --help and a bad key stay instant

    from ..record import atomic
    from ..systems.bench import run_bench
    from ..systems.bench_report import format_state, format_table, state_report

    if options.threads:
        torch.set_num_threads(options.threads)
    specs = variant_specs(overrides, options.input_names)
    if options.state_only:
        report = state_report(specs, overrides)
    else:
        reference = None if not options.bench.reference else \
            specs["learned"] if "learned" in specs else variant_spec(overrides, "learned")
        report = run_bench(specs, options.bench, reference_spec=reference, overrides=overrides)
        print(format_table(report))
    print(format_state(report["state_accounting"], report["model"]))
    device = report.get("device", {}).get("type", "cpu")
    out = Path(options.json) if options.json else default_json_path(next(iter(specs.values())), device,
                                                                     options.state_only)
    atomic.write_json(out, report)  # never a half-written report under the final name
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench)


if __name__ == "__main__":
    exit_with(main())
