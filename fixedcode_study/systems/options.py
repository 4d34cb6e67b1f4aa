"""The benchmarks' options: what `fixedcode bench`, `bench-input` and `bench-output` are asked to do.

One frozen dataclass per benchmark, each value checked in `__post_init__` (one line naming the
field and the fix). They live apart from the benchmarks themselves so that a command's `--help`
and a bad setting answer without loading torch: the checks that need the run settings
(systems/fit.py's SETTINGS) import them when they run. The fields' docstrings are the commands'
help (cli/args.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import ConfigError

Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[str, ...] = get_args(Device)
Schedule = Literal["auto", "abba", "interleaved", "sequential"]  # auto and interleaved (its former name): abba
SCHEDULE_NAMES: tuple[str, ...] = get_args(Schedule)
Part = Literal["all", "head", "model"]
PARTS: tuple[str, ...] = get_args(Part)
PAPER_VOCAB, PAPER_D_MODEL = 49_152, 2_048


def _one_of(field: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(field, f"unknown {field} {value!r}", f"use one of {', '.join(allowed)}")


def _positive(**values: int) -> None:
    for field, value in values.items():
        if value < 1:
            raise ConfigError(field, f"{value} is not positive", f"pass {field}>=1")


@dataclass(frozen=True)
class BenchOptions:
    """How the benchmark (systems/bench.py) runs."""

    steps: int = 10
    """timed steps per model, over all passes (median reported)"""
    warmup: int = 2
    """untimed steps at the start of every fit"""
    memory_steps: int = 2
    """steps per model in the peak-memory pass (0 counts as 1)"""
    reference: bool = True
    """also run Hugging Face's LlamaForCausalLM with the same weights"""
    device: Device = "auto"
    """where the models run"""
    schedule: Schedule = "auto"
    """auto = abba (also 'interleaved', its former name): the timed steps split over a pass and a
    reversed pass; sequential: one pass"""
    settings: str = "default"
    """default (what `run` uses), all, or a comma-separated list of fp32, fp32_compiled, bf16,
    bf16_compiled; fp32_compiled_input and bf16_compiled_input compile the input layer too (not bitwise
    at 2+ threads)"""
    jobs: int = 1
    """CPU: also time N jobs side by side (cores/N threads each)"""

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ConfigError("steps", f"{self.steps} timed steps", "pass steps>=1")
        if self.warmup < 0:
            raise ConfigError("warmup", f"{self.warmup} warm-up steps", "pass warmup>=0")
        if self.memory_steps < 0:
            raise ConfigError("memory_steps", f"{self.memory_steps} steps", "pass memory_steps>=1")
        _one_of("device", self.device, DEVICES)
        _one_of("schedule", self.schedule, SCHEDULE_NAMES)
        from .timing import check_settings  # the run settings: loaded when a bench is asked for

        check_settings(self.settings)
        if self.jobs < 1 or (self.jobs > 1 and self.device == "cuda"):
            raise ConfigError("jobs", f"got {self.jobs} on {self.device}", "use jobs >= 1, and > 1 only on CPU")


@dataclass(frozen=True)
class InputBenchOptions:
    """The width, batch and repeats of the input-layer benchmark (systems/bench_input.py)."""

    vocab_size: int = PAPER_VOCAB
    """vocabulary size"""
    d_model: int = PAPER_D_MODEL
    """model width"""
    batch: int = 8
    """sequences per batch"""
    seq: int = 2048
    """tokens per sequence"""
    repeats: int = 5
    """timed repeats per variant (median reported)"""
    device: Device = "auto"
    """where the layers run"""
    prototypes: bool = False
    """also time candidate fixed-code forwards"""

    def __post_init__(self) -> None:
        _positive(vocab_size=self.vocab_size, d_model=self.d_model, batch=self.batch, seq=self.seq,
                  repeats=self.repeats)
        _one_of("device", self.device, DEVICES)


@dataclass(frozen=True)
class OutputBenchOptions:
    """The width, batch and repeats of the head benchmark (systems/bench_output.py)."""

    vocab_size: int = PAPER_VOCAB
    """head part: vocabulary size"""
    d_model: int = PAPER_D_MODEL
    """head part: model width"""
    batch: int = 4
    """sequences: B of the head part's h (B, T, d); generation's batch in both parts"""
    seq: int = 512
    """head part: tokens per sequence (T)"""
    repeats: int = 3
    """timed calls per head (head part; generation in the model part), median reported"""
    device: Device = "auto"
    """where the heads run"""
    part: Part = "all"
    """all, head (alone, at paper width) or model (the whole model at the composed preset)"""
    steps: int = 6
    """model part: timed optimizer steps per head (over two passes)"""
    warmup: int = 2
    """model part: untimed steps at the start of every fit"""
    setting: str = "fp32"
    """model part: fp32, fp32_compiled, bf16 or bf16_compiled"""
    prompt_len: int = 32
    """model part: prompt tokens per generated sequence"""
    new_tokens: int = 32
    """model part: greedy tokens generated per sequence"""

    def __post_init__(self) -> None:
        _positive(vocab_size=self.vocab_size, d_model=self.d_model, batch=self.batch, seq=self.seq,
                  repeats=self.repeats, steps=self.steps, prompt_len=self.prompt_len, new_tokens=self.new_tokens)
        if self.warmup < 0:
            raise ConfigError("warmup", f"{self.warmup} warm-up steps", "pass warmup>=0")
        _one_of("device", self.device, DEVICES)
        _one_of("part", self.part, PARTS)
        from .fit import SETTINGS  # the run settings: loaded when a bench is asked for

        _one_of("setting", self.setting, tuple(SETTINGS))
        if SETTINGS[self.setting].compile and self.warmup < 1:
            raise ConfigError("warmup", "0 with a compiled setting: the compile would be timed as a step",
                              "pass warmup>=1")
