"""Assemble a Decoder from the model preset and the input config: the one place that does it.

Training, describe, evaluation, checkpoint loading and benchmarks all build through here, so a
variant defined here is the same model everywhere. Building is two steps, both pure functions of
the two configs (so a checkpoint, which stores both, rebuilds the identical model):

- `resolve_model(model_cfg, input_cfg)`: the `ModelSpec`, what will be built, decided once: the
  preset parsed, size matching applied, the FLOP-match target checked. The input config arrives
  with its references already resolved (an input that names another variant, `init_code:
  binary16` or `rms_reference: binary16`, carries that variant's settings:
  config.resolve_input_references, called once by the job's spec resolution, spec/job.py).
- `build_decoder(spec, seed)`: the modules, from that spec alone.
`build_model(model_cfg, input_cfg)` does both for callers holding stored configs (checkpoints,
probes, tests), resolving references first.

- Size matching: an input config with `size_match: learned` widens or deepens the body until the
  model's trainable parameter count matches the learned-table baseline of the same preset. A fixed
  code saves the V x d input table; this control spends exactly those parameters on the body to
  ask "is it the code, or just fewer trainable parameters?":

    size_match: learned                  target = trainable count of the preset with input=learned
    size_match_by: d_ff                  widen every MLP (per unit of d_ff per layer: 3 d params for
                                         SwiGLU, 2 d for the GELU MLP)
                   n_layer               add whole blocks (coarse: often cannot land within tolerance)
                   n_layer+d_ff          add as many whole blocks as fit, then widen d_ff for the rest
    size_match_tolerance: 0.01           |trainable - target| / target must end up <= this
    size_match_multiple_of: 1            keep d_ff a multiple of this (e.g. 64 for GPU-friendly shapes)

FLOP matching (`flop_match: learned`, `flop_matched_tokens`) is the compute counterpart of size
matching. The FLOPs formula (accounting.flops_per_token) counts no FLOPs for an input lookup, table
or computed code, so every fixed code on the preset's body already costs exactly the learned model's
FLOPs per token: plain binary16 *is* learned's FLOP-matched counterpart. Only the size-matched
bodies cost more per token (~1.35x on cpu_tiny), so their FLOP-matched version trains the same
size-matched model on fewer tokens: tokens x F(learned) / F(this model), which equals the learned
baseline's training FLOPs (to within one optimizer step). There is no way to match both parameters
and FLOPs per token with a fixed code: the body's parameters are all matmul weights, so every added
parameter adds 6 FLOPs per token; only a lookup table holds parameters that cost no FLOPs.

Init seed (common random numbers). `build_model(..., seed=s)` makes every random initial value a
function of (s, the part of the model it belongs to) alone (model.Decoder), so at one seed the
learned table and every fixed code start from bitwise identical body and head weights. The build
leaves the global RNG exactly as it found it (module constructors' own default inits, which
reset_parameters overwrites, run inside fork_rng), so nothing after the build sees a different
global random state because one variant has a table to draw and another does not.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch

from .accounting import block_params, body_params, flops_per_token, head_params, mlp_params_per_unit
from .config import resolve_input_references, resolve_output_references
from .errors import ConfigError
from .inputs import build_input, input_trainable_params
from .model import Decoder, ModelConfig, init_record
from .heads import build_output, check_output, is_default_output, output_flops_per_token, output_trainable_params

__all__ = ["ModelSpec", "build_decoder", "build_model", "flop_matched_tokens", "init_record", "match_size",
           "resolve_input_references", "resolve_model", "trainable_params"]

SIZE_MATCH_METHODS = ("d_ff", "n_layer", "n_layer+d_ff")


@dataclass(frozen=True)
class ModelSpec:
    """The model a (model preset, input) pair builds, decided before any module exists.

    `config` is the architecture as built (size matching applied); `preset` the one conf/model
    gave. FLOPs, the compile decision and MFU read `config`, so they describe the built model.
    `input` is the input config with its references resolved: exactly what build_input receives.
    """
    preset: ModelConfig
    config: ModelConfig
    input: Mapping[str, Any]
    size_record: Mapping[str, Any] = field(default_factory=dict)  # match_size's record ({} unmatched)
    flop_match: str | None = None
    output: Mapping[str, Any] = field(default_factory=dict)  # the head's config, references resolved; {} = untied

    def to_json(self) -> dict[str, Any]:
        """Plain data that `from_json` turns back into an equal ModelSpec: what a checkpoint stores,
        so a load rebuilds this very model without resolving anything against conf/ again."""
        return {"preset": self.preset.to_dict(), "config": self.config.to_dict(), "input": copy.deepcopy(dict(self.input)),
                "size_record": dict(self.size_record), "flop_match": self.flop_match,
                "output": copy.deepcopy(dict(self.output))}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelSpec":
        return cls(ModelConfig.from_mapping(data["preset"]), ModelConfig.from_mapping(data["config"]),
                   copy.deepcopy(dict(data["input"])), dict(data["size_record"]), data["flop_match"],
                   copy.deepcopy(dict(data["output"])))

    def head_flops(self) -> int | None:
        """The head's training FLOPs per token; None for the untied head (the formula's own 6 V d)."""
        if is_default_output(self.output):
            return None
        return output_flops_per_token(self.output, self.config.vocab_size, self.config.d_model)

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token of the built model (accounting.flops_per_token's total)."""
        return flops_per_token(self.config, seq_len, self.head_flops())["total"]

    def flop_matched_tokens(self, tokens: int, seq_len: int) -> int:
        """The training token budget: `tokens`, or with `flop_match: learned` the budget at which
        this model's training FLOPs equal the learned baseline's on `tokens`:

            tokens x F(preset body) / F(this model's body, after size matching)

        F = accounting.flops_per_token at seq_len (input lookups cost nothing in it, so the learned
        baseline's F is the preset's). Rounded down; the training plan rounds up to whole steps.
        """
        if self.flop_match is None:
            return int(tokens)
        ratio = flops_per_token(self.preset, seq_len)["total"] / self.flops_per_token(seq_len)
        return max(1, int(int(tokens) * ratio))


def resolve_model(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any],
                  output_cfg: Mapping[str, Any] | None = None) -> ModelSpec:
    """The ModelSpec of a model preset, an input config and an output config (None or {}: the
    untied head), all with their references resolved."""
    input_cfg, output_cfg = dict(input_cfg), dict(output_cfg or {})
    check_output(output_cfg or {"type": "untied"}, input_cfg)
    preset = ModelConfig.from_mapping(model_cfg)
    matched, size_record = match_size(preset, input_cfg, output_cfg)
    return ModelSpec(preset, matched, input_cfg, size_record, flop_match_spec(input_cfg), output_cfg)


def build_model(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any], seed: int | None = None,
                output_cfg: Mapping[str, Any] | None = None) -> Decoder:
    """A Decoder from stored configs (a checkpoint's, a probe's, a test's): references resolved,
    then resolve_model and build_decoder. A job builds from its resolved spec instead. A stored
    config's `output` (absent in records older than the axis: the untied head) goes to output_cfg."""
    spec = resolve_model(model_cfg, resolve_input_references(input_cfg), resolve_output_references(output_cfg))
    return build_decoder(spec, seed=seed)


def build_decoder(spec: ModelSpec, seed: int | None = None) -> Decoder:
    """The one place a Decoder is assembled (train, describe, evaluate, bench), from its ModelSpec.

    seed: the init seed; training passes the run's `seed`. None means torch.initial_seed(), the seed
    the global generator was last seeded with (after L.seed_everything(s) or torch.manual_seed(s)
    that is s), so a caller that only seeds globally still gets that seed's init. Shapes-only builds
    and checkpoint loading (the weights are loaded over the init) need not pass it.
    """
    seed = torch.initial_seed() if seed is None else int(seed)
    mcfg = spec.config
    # Constructors draw default inits from the global RNG (nn.Linear, nn.Embedding) before
    # Decoder.reset_parameters redraws everything from its own generators; fork_rng puts the
    # global state back, so the build consumes no global randomness whatever the variant.
    with torch.random.fork_rng(devices=[]):
        input_layer = build_input(spec.input, mcfg.vocab_size, mcfg.d_model, mcfg.init_std)
        input_layer.build_info.update(spec.size_record)  # reaches results.json via properties()
        if spec.flop_match:
            input_layer.build_info["flop_match"] = spec.flop_match
        head = build_output(spec.output, mcfg.vocab_size, mcfg.d_model, mcfg.init_std, input_layer)
        return Decoder(mcfg, input_layer, seed=seed, head=head)


def trainable_params(cfg: ModelConfig, input_trainable: int, head_trainable: int | None = None) -> int:
    """Trainable count of a Decoder: input + body + head (None: the untied head's V x d)."""
    return input_trainable + body_params(cfg) + (head_params(cfg) if head_trainable is None else head_trainable)


# The size- and FLOP-matching settings of an input config, with the documented method (module
# docstring) for those it leaves out: only the *_sizematched and *_isoflop inputs declare them, and
# `+input.size_match=learned` on any other input gets these.
MATCH_DEFAULTS = {"size_match": None, "size_match_by": "d_ff", "size_match_tolerance": 0.01,
                  "size_match_multiple_of": 1, "flop_match": None}


def match_settings(input_cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {key: input_cfg[key] if key in input_cfg else default for key, default in MATCH_DEFAULTS.items()}


def size_match_spec(input_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    settings = match_settings(input_cfg)
    target = settings["size_match"]
    if target in (None, False, "none"):
        return None
    if target != "learned":
        raise ConfigError("input.size_match", f"unknown target {target!r}", "use 'learned' or null")
    by = settings["size_match_by"]
    if by not in SIZE_MATCH_METHODS:
        raise ConfigError("input.size_match_by", f"unknown method {by!r}", f"use one of {', '.join(SIZE_MATCH_METHODS)}")
    tol, multiple = float(settings["size_match_tolerance"]), int(settings["size_match_multiple_of"])
    if not 0 < tol < 1 or multiple < 1:
        raise ConfigError("input.size_match_tolerance", f"tolerance {tol} / multiple_of {multiple} out of range",
                          "use 0 < size_match_tolerance < 1 and size_match_multiple_of >= 1")
    return {"target": target, "by": by, "tolerance": tol, "multiple_of": multiple}


def match_size(model_cfg: ModelConfig, input_cfg: Mapping[str, Any],
               output_cfg: Mapping[str, Any] | None = None) -> tuple[ModelConfig, dict[str, Any]]:
    """Return the preset adjusted per the input's size_match settings, and a flat record of it.

    Without size_match the preset comes back unchanged with an empty record. Only the body
    changes (d_ff, n_layer), so each input's trainable count is computed once, from shapes.
    """
    spec = size_match_spec(input_cfg)
    if spec is None:
        return model_cfg, {}
    V, d = model_cfg.vocab_size, model_cfg.d_model
    target = trainable_params(model_cfg, input_trainable_params({"type": "learned"}, V, d))
    own_input = input_trainable_params(input_cfg, V, d)
    own_head = None if is_default_output(output_cfg) else output_trainable_params(output_cfg, V, d)
    start = trainable_params(model_cfg, own_input, own_head)
    deficit = target - start
    if deficit < 0:
        raise ConfigError("input.size_match", f"this input already has {start:,} trainable parameters, more than "
                          f"the learned baseline's {target:,}", "drop size_match for this input")

    def count(cfg: ModelConfig) -> int:
        return trainable_params(cfg, own_input, own_head)

    def widen(cfg: ModelConfig, missing: int) -> ModelConfig:
        """Closest d_ff (a multiple of multiple_of) for `missing` extra parameters."""
        per_unit = mlp_params_per_unit(cfg) * cfg.n_layer
        m = spec["multiple_of"]
        ideal = cfg.d_ff + missing / per_unit
        candidates = {max(m, int(ideal // m) * m), max(m, (int(ideal // m) + 1) * m)}
        return min((replace(cfg, d_ff=c) for c in candidates), key=lambda c: abs(count(c) - target))

    by = spec["by"]
    if by == "d_ff":
        matched = widen(model_cfg, deficit)
    elif by == "n_layer":
        per_block = block_params(model_cfg)
        options = [replace(model_cfg, n_layer=model_cfg.n_layer + k) for k in
                   {deficit // per_block, deficit // per_block + 1}]
        matched = min(options, key=lambda c: abs(count(c) - target))
    else:  # n_layer+d_ff: whole blocks first, the remainder by widening
        deeper = replace(model_cfg, n_layer=model_cfg.n_layer + deficit // block_params(model_cfg))
        matched = widen(deeper, target - count(deeper))
    matched.validate()
    final = count(matched)
    error = (final - target) / target
    if abs(error) > spec["tolerance"]:
        raise ConfigError(
            "input.size_match_by",
            f"by={by} gets no closer than {final:,} trainable parameters ({error:+.2%}) to the learned "
            f"baseline's {target:,} (tolerance {spec['tolerance']:.0%}) with n_layer={matched.n_layer}, d_ff={matched.d_ff}",
            "use input.size_match_by=d_ff (or n_layer+d_ff), a smaller size_match_multiple_of or a larger tolerance",
        )
    record = {
        "size_match": spec["target"],
        "size_match_by": by,
        "size_match_target_trainable": target,
        "size_match_unmatched_trainable": start,
        "size_match_trainable": final,
        "size_match_rel_error": error,
        "size_match_n_layer": matched.n_layer,
        "size_match_d_ff": matched.d_ff,
        "size_match_base_n_layer": model_cfg.n_layer,
        "size_match_base_d_ff": model_cfg.d_ff,
    }
    return matched, record


def flop_match_spec(input_cfg: Mapping[str, Any]) -> str | None:
    target = match_settings(input_cfg)["flop_match"]
    if target in (None, False, "none"):
        return None
    if target != "learned":
        raise ConfigError("input.flop_match", f"unknown target {target!r}", "use 'learned' or null")
    return target


def flop_matched_tokens(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any], tokens: int,
                        seq_len: int) -> int:
    """ModelSpec.flop_matched_tokens for stored configs (references resolved first)."""
    if flop_match_spec(input_cfg) is None:
        return int(tokens)
    return resolve_model(model_cfg, resolve_input_references(input_cfg)).flop_matched_tokens(tokens, seq_len)
