"""`fixedcode bench-input [settings] [hydra overrides]`: the input layer alone.

Forward, backward and optimizer cost of each input interface at paper width; see
systems/bench_input.py for what is measured. Also `python -m fixedcode_study.bench_input`.

examples:
  python -m fixedcode_study.bench_input                               # paper width, 8 x 2048
  python -m fixedcode_study.bench_input --batch 2 --seq 2048 --prototypes
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..config import compose_variant
from ..errors import ConfigError
from ..record import atomic
from ..spec import JobSpec
from ..systems.bench_input import PAPER_D_MODEL, PAPER_VOCAB, InputBenchOptions, format_table, run_input_bench
from .args import Command, Key, exit_with, run_command

COMMAND = Command("bench-input", __doc__, overrides=True, keys=(
    Key("inputs", "learned,binary16,gf2", "comma-separated conf/input names", flag="--inputs"),
    Key("vocab", PAPER_VOCAB, "vocabulary size", flag="--vocab"),
    Key("d_model", PAPER_D_MODEL, "model width", flag="--d-model"),
    Key("batch", 8, "sequences per batch", flag="--batch"),
    Key("seq", 2048, "tokens per sequence", flag="--seq"),
    Key("repeats", 5, "timed repeats per variant (median reported)", flag="--repeats"),
    Key("device", "auto", "where the layers run", flag="--device", choices=("auto", "cpu", "cuda")),
    Key("threads", None, "torch.set_num_threads for CPU runs", flag="--threads", kind=int),
    Key("prototypes", False, "also time candidate fixed-code forwards", flag="--prototypes"),
    Key("json", None, "write the report here as JSON", flag="--json", kind=str),
))


def input_specs(overrides: Sequence[str], inputs: Sequence[str]) -> dict[str, JobSpec]:
    """One job per input variant named (an `input=` override is replaced by each), composed and resolved."""
    return {name: JobSpec.from_cfg(compose_variant(overrides, name)) for name in inputs}


def bench_input(values: dict[str, Any], overrides: list[str]) -> int:
    options = InputBenchOptions(vocab_size=values["vocab"], d_model=values["d_model"], batch=values["batch"],
                                seq=values["seq"], repeats=values["repeats"], device=values["device"],
                                prototypes=values["prototypes"])
    if values["threads"]:
        torch.set_num_threads(values["threads"])
    inputs = [s for s in values["inputs"].split(",") if s]
    if not inputs:
        raise ConfigError("inputs", "no input variant given", "pass e.g. inputs=learned,binary16,gf2")
    rep = run_input_bench(input_specs(overrides, inputs), options)
    print(format_table(rep))
    if values["json"]:
        atomic.write_json(values["json"], rep)
        print(f"wrote {values['json']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench_input)


if __name__ == "__main__":
    exit_with(main())
