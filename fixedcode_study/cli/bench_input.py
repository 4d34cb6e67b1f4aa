"""`fixedcode bench-input [settings] [hydra overrides]`: the input layer alone.

Forward, backward and optimizer cost of each input interface at paper width; see
systems/bench_input.py for what is measured.

examples:
  fixedcode bench-input                                       # paper width, 8 x 2048
  fixedcode bench-input batch=2 seq=2048 prototypes=true
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import compose_variant
from ..errors import ConfigError
from ..systems.options import InputBenchOptions
from .args import Command, exit_with, run_command

DEFAULT_INPUTS = "learned,binary16,gf2"


@dataclass(frozen=True, kw_only=True)
class BenchInputOptions:
    inputs: str = DEFAULT_INPUTS
    """comma-separated conf/input names"""
    bench: InputBenchOptions = field(default_factory=InputBenchOptions)
    threads: int | None = None
    """torch.set_num_threads for CPU runs"""
    json: str | None = None
    """write the report here as JSON"""

    def __post_init__(self) -> None:
        if not self.input_names:
            raise ConfigError("inputs", "no input variant given", f"pass e.g. inputs={DEFAULT_INPUTS}")

    @property
    def input_names(self) -> list[str]:
        return [s for s in self.inputs.split(",") if s]


COMMAND = Command("bench-input", __doc__, BenchInputOptions, overrides=True)


def input_specs(overrides: Sequence[str], inputs: Sequence[str]) -> dict[str, Any]:
    """One job (spec.JobSpec) per input variant named (an `input=` override is replaced by each), composed and resolved."""
    from ..spec import JobSpec

    return {name: JobSpec.from_cfg(compose_variant(overrides, name)) for name in inputs}


def bench_input(options: BenchInputOptions, overrides: list[str]) -> int:
    import torch

    from ..record import atomic
    from ..systems.bench_input import format_table, run_input_bench

    if options.threads:
        torch.set_num_threads(options.threads)
    rep = run_input_bench(input_specs(overrides, options.input_names), options.bench)
    print(format_table(rep))
    if options.json:
        atomic.write_json(options.json, rep)
        print(f"wrote {options.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench_input)


if __name__ == "__main__":
    exit_with(main())
