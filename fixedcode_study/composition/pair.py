"""The two members of a composition, loaded from their final checkpoints, and the rule that they match.

    pair = load_pair(folder_a, folder_b, measures=("ensemble", "stitch", "barrier"))
    pair.a.model, pair.b.model            # Decoders in eval mode, on the CPU
    pair.a.spec                           # the JobSpec each was trained under (its checkpoint stores it)

Every measure compares the two on the same held-out tokens and feeds one's hidden states or weights
to the other, so a pair must share (checked in this order; the first difference is one line naming
the field and the fix):
  model.vocab_size   the vocabulary;
  data.tokenizer     the tokenizer itself (the same vocabulary size does not make the same tokens);
  data               the prepared corpus (its cache key): the same held-out split;
  train.seq_len      the validation windows;
  model.<key>        the architecture (every key of model.ModelConfig but the init scale), so block k
                     of one fits block k of the other;
and for the barrier, which interpolates every parameter, the same parameters (names and shapes: the
same input and head) and equal buffers (a fixed code's matrix, say): nothing to interpolate there.
Inputs and heads may otherwise differ (an ensemble or a stitch of a learned-input model and a
fixed-code one is well defined). A checkpoint without a stored spec (format 1) is refused: the spec
says how its final validation read the held-out split.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Sequence

import torch

from ..errors import ConfigError
from ..evaluation.harness import file_sha256
from ..model import Decoder, ModelConfig
from ..record.checkpoint import Checkpoint, load_checkpoint, weights_file
from ..record.jobdir import JobDir
from ..spec import JobSpec

# Architecture keys a pair must share: every ModelConfig field but the init scale, which no trained
# weight depends on any more.
ARCHITECTURE_KEYS = tuple(f.name for f in fields(ModelConfig) if f.name != "init_std")
SAME_DATA = "compose two models trained on one corpus and tokenizer (the same data= settings)"
SAME_ARCHITECTURE = "compose two models of one architecture (the same model= preset and size settings)"


@dataclass
class Member:
    """One model of the pair: `role` is "a" or "b" (the command's a= and b=)."""

    role: str
    checkpoint: Checkpoint
    spec: JobSpec

    @property
    def model(self) -> Decoder:
        return self.checkpoint.model

    @property
    def job(self) -> JobDir | None:
        return JobDir.of_final_checkpoint(self.checkpoint.path)

    def record(self) -> dict[str, Any]:
        """compose.json `a` / `b`: where the member is, what it is (fingerprint, spec, weights hash) and
        the final validation its own job recorded (null outside a job directory)."""
        job = self.job
        results = job.read_results() if job is not None and job.results.is_file() else None
        config = self.checkpoint.config
        return {"checkpoint": str(self.checkpoint.path.resolve()), "job": str(job.path) if job else None,
                "fingerprint": config.get("fingerprint"), "sweep": config.get("sweep"), "seed": config.get("seed"),
                "model": self.spec.model_name, "input": self.spec.input_name, "output": self.spec.output_name,
                "weights_sha256": file_sha256(weights_file(self.checkpoint.path)),
                "job_final": (results or {}).get("final"), "spec": config["spec"]}


@dataclass
class Pair:
    a: Member
    b: Member

    @property
    def members(self) -> tuple[Member, Member]:
        return self.a, self.b


def load_member(role: str, folder: str | os.PathLike) -> Member:
    try:
        checkpoint = load_checkpoint(folder)
    except ConfigError as err:  # its refusals name checkpoint=; here the setting is a= or b=
        if err.field != "checkpoint":
            raise
        raise ConfigError(role, err.problem, err.fix.replace("checkpoint=", f"{role}=")) from None
    stored = checkpoint.config.get("spec")
    if stored is None:
        raise ConfigError(role, f"{checkpoint.path} is a format-1 checkpoint, without the spec its final validation "
                          "ran under", "retrain the job with today's code (force=true) to compose it")
    return Member(role, checkpoint, JobSpec.from_json(stored))


def load_pair(folder_a: str | os.PathLike, folder_b: str | os.PathLike, measures: Sequence[str]) -> Pair:
    """Both members, loaded and checked against each other for these measures (module docstring)."""
    pair = Pair(load_member("a", folder_a), load_member("b", folder_b))
    check_pair(pair, measures)
    return pair


def check_pair(pair: Pair, measures: Sequence[str]) -> None:
    a, b = pair.members
    ca, cb = a.model.config, b.model.config
    if ca.vocab_size != cb.vocab_size:
        raise ConfigError("model.vocab_size", f"a has {ca.vocab_size}, b has {cb.vocab_size}", SAME_DATA)
    if a.checkpoint.tokenizer.to_str() != b.checkpoint.tokenizer.to_str():
        raise ConfigError("data.tokenizer", "a and b were trained with different tokenizers", SAME_DATA)
    key_a, key_b = (m.checkpoint.data.get("cache_key") for m in pair.members)
    if key_a != key_b:
        raise ConfigError("data", f"a was trained on data cache {key_a}, b on {key_b} (another corpus or held-out "
                          "split)", SAME_DATA)
    if a.spec.plan.seq_len != b.spec.plan.seq_len:
        raise ConfigError("train.seq_len", f"a has {a.spec.plan.seq_len}, b has {b.spec.plan.seq_len} (their "
                          "validation windows differ)", "compose two models trained on one seq_len")
    for key in ARCHITECTURE_KEYS:
        if getattr(ca, key) != getattr(cb, key):
            raise ConfigError(f"model.{key}", f"a has {getattr(ca, key)}, b has {getattr(cb, key)}", SAME_ARCHITECTURE)
    if "barrier" in measures:
        check_interpolable(a.model, b.model)


def _part(name: str) -> str:
    """The setting that decides a parameter or buffer: the input, the head, or the model's body."""
    return "input" if name.startswith("input.") else "output" if name.startswith("head.") else "model"


def check_interpolable(a: Decoder, b: Decoder) -> None:
    """The barrier's condition: the same parameters (names, shapes) and bitwise equal buffers."""
    fix = "the barrier interpolates every parameter: compose two models of one input and one head (one arm)"
    params_a, params_b = dict(a.named_parameters()), dict(b.named_parameters())
    for name in sorted(set(params_a) ^ set(params_b)):
        owner = "a" if name in params_a else "b"
        raise ConfigError(_part(name), f"only {owner} has the parameter {name}", fix)
    for name, p in params_a.items():
        if p.shape != params_b[name].shape:
            raise ConfigError(_part(name), f"{name} is {tuple(p.shape)} in a, {tuple(params_b[name].shape)} in b", fix)
    buffers_a, buffers_b = dict(a.named_buffers()), dict(b.named_buffers())
    for name in sorted(set(buffers_a) | set(buffers_b)):
        if name not in buffers_a or name not in buffers_b or not torch.equal(buffers_a[name], buffers_b[name]):
            raise ConfigError(_part(name), f"the buffer {name} differs between a and b (a fixed code drawn from "
                              "another seed?): there is no line between them", fix)

