"""`fixedcode bench-output [settings] [hydra overrides]`: the cost of each output head.

Side by side for every head of conf/output, with ratios to the untied head: at paper width the head
alone (forward + backward of the training path, AdamW state bytes, generation tokens/s), and at the
composed model preset (cpu_tiny) the whole model (training and greedy generation tokens/s). What is
measured and how: systems/bench_output.py.

examples:
  fixedcode bench-output                                      # both parts, every head
  fixedcode bench-output part=head batch=1 seq=512 repeats=3
  fixedcode bench-output part=model outputs=untied,bitchain model=cpu_30m
  fixedcode bench-output markdown=heads.md json=heads.json
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import available, compose
from ..errors import ConfigError
from ..systems.options import OutputBenchOptions
from .args import Command, exit_with, run_command

DEFAULT_OUTPUTS = "untied,tied,fixed,fixed_gaussian,bitchain,bitchain_gf2"


@dataclass(frozen=True, kw_only=True)
class BenchOutputOptions:
    outputs: str = DEFAULT_OUTPUTS
    """comma-separated conf/output names (untied first: the ratios' base)"""
    bench: OutputBenchOptions = field(default_factory=OutputBenchOptions)
    threads: int | None = None
    """torch.set_num_threads for CPU runs"""
    json: str | None = None
    """write the report here as JSON"""
    markdown: str | None = None
    """write the tables here (markdown)"""

    def __post_init__(self) -> None:
        if not self.output_names:
            raise ConfigError("outputs", "no output head given", f"pass e.g. outputs={DEFAULT_OUTPUTS}")

    @property
    def output_names(self) -> list[str]:
        return [s for s in self.outputs.split(",") if s]


COMMAND = Command("bench-output", __doc__, BenchOutputOptions, overrides=True)


def head_cases(overrides: Sequence[str], outputs: Sequence[str]) -> dict[str, Any]:
    """One job per head named (an `output=` override is replaced by each), composed and resolved
    (systems.bench_output.HeadCase); a head that cannot sit on the job's input (output=tied on a
    fixed code) is resolved on input=learned, the table its head part is built on, and says why."""
    from ..spec import JobSpec
    from ..systems.bench_output import HeadCase

    known = available("output")
    for name in outputs:
        if name not in known:
            raise ConfigError("outputs", f"no conf/output option {name!r}", f"use some of {', '.join(known)}")
    kept = [o for o in overrides if not o.startswith("output=")]
    cases = {}
    for name in outputs:
        try:
            cases[name] = HeadCase(JobSpec.from_cfg(compose([*kept, f"output={name}"])))
        except ConfigError as err:
            if err.field != "output":  # not the pairing of head and input: the job's own error
                raise
            learned = [o for o in kept if not o.startswith("input=")] + ["input=learned", f"output={name}"]
            cases[name] = HeadCase(JobSpec.from_cfg(compose(learned)), why=err.problem)
    return cases


def bench_output(options: BenchOutputOptions, overrides: list[str]) -> int:
    import torch  # the measuring stack loads only when a bench runs

    from ..record import atomic
    from ..systems.bench_output import format_tables, run_output_bench

    if options.threads:
        torch.set_num_threads(options.threads)
    report = run_output_bench(head_cases(overrides, options.output_names), options.bench, overrides)
    tables = format_tables(report)
    print(tables)
    if options.markdown:
        atomic.write_text(options.markdown, tables + "\n")
        print(f"wrote {options.markdown}")
    if options.json:
        atomic.write_json(options.json, report)
        print(f"wrote {options.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench_output)


if __name__ == "__main__":
    exit_with(main())
