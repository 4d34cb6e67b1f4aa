"""`fixedcode bench-output [settings] [hydra overrides]`: the cost of each output head.

Side by side for every head of conf/output, with ratios to the untied head: at paper width the head
alone (forward + backward of the training path, AdamW state bytes, generation tokens/s), and at the
composed model preset (cpu_tiny) the whole model (training and greedy generation tokens/s). What is
measured and how: systems/bench_output.py. Also `python -m fixedcode_study.bench_output`.

examples:
  python -m fixedcode_study.bench_output                              # both parts, every head
  python -m fixedcode_study.bench_output --part head --batch 1 --seq 512 --repeats 3
  python -m fixedcode_study.bench_output --part model --outputs untied,bitchain model=cpu_30m
  python -m fixedcode_study.bench_output --markdown heads.md --json heads.json
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import available, compose
from ..errors import ConfigError
from .args import Command, Key, exit_with, run_command

DEFAULT_OUTPUTS = "untied,tied,fixed,fixed_gaussian,bitchain,bitchain_gf2"

COMMAND = Command("bench-output", __doc__, overrides=True, keys=(
    Key("outputs", DEFAULT_OUTPUTS, "comma-separated conf/output names (untied first: the ratios' base)",
        flag="--outputs"),
    Key("part", "all", "all, head (alone, at paper width) or model (the whole model at the preset)", flag="--part",
        choices=("all", "head", "model")),
    Key("vocab", 49_152, "head part: vocabulary size", flag="--vocab"),
    Key("d_model", 2_048, "head part: model width", flag="--d-model"),
    Key("batch", 4, "sequences (head part's training batch; generation's batch in both parts)", flag="--batch"),
    Key("seq", 512, "head part: tokens per sequence", flag="--seq"),
    Key("repeats", 3, "timed calls per head (median reported)", flag="--repeats"),
    Key("steps", 6, "model part: timed training steps per head", flag="--steps"),
    Key("warmup", 2, "model part: untimed steps at the start of every fit", flag="--warmup"),
    Key("setting", "fp32", "model part: fp32, fp32_compiled, bf16 or bf16_compiled", flag="--setting",
        choices=("fp32", "fp32_compiled", "bf16", "bf16_compiled")),
    Key("prompt_len", 32, "model part: prompt tokens per generated sequence", flag="--prompt-len"),
    Key("new_tokens", 32, "model part: greedy tokens generated per sequence", flag="--new-tokens"),
    Key("device", "auto", "where the heads run", flag="--device", choices=("auto", "cpu", "cuda")),
    Key("threads", None, "torch.set_num_threads for CPU runs", flag="--threads", kind=int),
    Key("json", None, "write the report here as JSON", flag="--json", kind=str),
    Key("markdown", None, "write the tables here (markdown)", flag="--markdown", kind=str),
))


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


def bench_output(values: dict[str, Any], overrides: list[str]) -> int:
    import torch  # the measuring stack loads only when a bench runs: --help and a bad key stay instant

    from ..record import atomic
    from ..systems.bench_output import OutputBenchOptions, format_tables, run_output_bench

    options = OutputBenchOptions(
        vocab_size=values["vocab"], d_model=values["d_model"], batch=values["batch"], seq=values["seq"],
        repeats=values["repeats"], device=values["device"], part=values["part"], steps=values["steps"],
        warmup=values["warmup"], setting=values["setting"], prompt_len=values["prompt_len"],
        new_tokens=values["new_tokens"])  # checked before anything is composed or built
    outputs = [s for s in values["outputs"].split(",") if s]
    if not outputs:
        raise ConfigError("outputs", "no output head given", f"pass e.g. outputs={DEFAULT_OUTPUTS}")
    if values["threads"]:
        torch.set_num_threads(values["threads"])
    report = run_output_bench(head_cases(overrides, outputs), options, overrides)
    tables = format_tables(report)
    print(tables)
    if values["markdown"]:
        atomic.write_text(values["markdown"], tables + "\n")
        print(f"wrote {values['markdown']}")
    if values["json"]:
        atomic.write_json(values["json"], report)
        print(f"wrote {values['json']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, bench_output)


if __name__ == "__main__":
    exit_with(main())
