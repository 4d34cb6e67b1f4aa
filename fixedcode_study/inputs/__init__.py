"""Input interfaces: modules that map token IDs (B, T) to input vectors (B, T, d_model).

The decoder is identical across variants; only this package changes. It owns the interfaces
(one file per family), the maths they share (tiling.py), GF(2) linear algebra (gf2.py) and the
registry below, which builds an interface from one input config. It never reads conf/: configs
arrive as mappings, with any variant named by another already replaced by its settings
(build.build_model does that).

learned.py
- `learned`        a trainable V x d_model table (the control).
- `learned_lowdim` a trainable V x K table (K small), tiled to d_model.
binary.py (computed from the ID on the fly: no parameters, no projection, no V x d table)
- `binary`         the canonical little-endian binary code of the ID, bit i = (id >> i) & 1, tiled
                   to d_model (with `permutation_seed`: the code of a seeded permutation of the ID).
- `gf2`            the binary code after a fixed invertible map over GF(2), y = A c (xor b), drawn
                   once from a seed (a K x K matrix is all it stores).
- `wide`           a code wider than ceil(log2 V): the minimal canonical code followed by extra fixed
                   bits (concatenated independent GF(2) recodings, or seeded random bits).
gaussian.py
- `random_fixed`   a frozen random Gaussian V x K code (a buffer drawn from `code_seed`), tiled.
spelling.py
- `spelling`       a fixed binary code from the token's own string: hashed character n-grams (a Bloom
                   filter), plus the ID's bits where two spellings collide. Needs the token strings.
mapped.py (the input continuum: between a fixed code and a full table)
- `code_map`       a fixed code (`code:` names one) then a trainable map shared by every token
                   (linear K x d, or a small MLP): trainability without token-specific parameters.
- `learned_lowrank` a trainable V x r table times a trainable r x d map.
Every input reports its trainable parameters split into token-specific (one row per token ID) and
shared (`trainable_split`, `token_specific_names`).
`learned` also covers the controls `trainable: false` (a frozen random table) and `init: code` /
`init: code_stats` (a learned table that starts at, or with the statistics of, a fixed code).
Every fixed code takes a `scale` (a number, or `match_init`: see base.py). With `rms_reference:
<variant>` match_init matches that fixed code's input RMS instead of model.init_std (e.g. a Gaussian
code with binary16's RMS).

Every interface reports `properties()` (code width, tile factor, values, injectivity, the code's
statistics over the vocabulary from stats.py, its RMS, ...), which the run records in results.json
and W&B so analysis can group by them. Random initial values (learned tables) are drawn in
`reset_parameters(generator)` from the generator the Decoder hands over (model.py).
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

import torch

from ..errors import ConfigError
from .base import FixedCode, InputInterface, init_normal_
from .binary import FixedBinaryCode, GF2Code, WideCode
from .gaussian import FixedGaussianCode
from .learned import LearnedEmbedding, LearnedLowDim, ReferenceCode
from .mapped import CodeMap, LearnedLowRank
from .spelling import SpellingCode
from .tiling import minimal_code_width, tile_to_width, tiled_rms

__all__ = [
    "INPUT_TYPES", "build_input", "input_trainable_params", "input_trainable_split",
    "InputInterface", "FixedCode", "LearnedEmbedding", "LearnedLowDim", "FixedBinaryCode", "GF2Code", "WideCode",
    "FixedGaussianCode", "CodeMap", "LearnedLowRank", "SpellingCode", "init_normal_", "minimal_code_width", "tile_to_width",
]

INPUT_TYPES: dict[str, type[InputInterface]] = {
    "learned": LearnedEmbedding,
    "binary": FixedBinaryCode,
    "gf2": GF2Code,
    "wide": WideCode,
    "random_fixed": FixedGaussianCode,
    "learned_lowdim": LearnedLowDim,
    "learned_lowrank": LearnedLowRank,
    "code_map": CodeMap,
    "spelling": SpellingCode,
}

# Keys of an input config that describe the variant but are not constructor arguments.
# The size_match* keys are read by build.build_model (they change the body, not the input), and
# flop_match by build.flop_matched_tokens (it changes the token budget).
_META_KEYS = {"name", "type", "description",
              "size_match", "size_match_by", "size_match_tolerance", "size_match_multiple_of", "flop_match"}


def input_type(cfg: Mapping[str, Any]) -> type[InputInterface]:
    kind = cfg.get("type")
    if kind not in INPUT_TYPES:
        raise ConfigError(
            "input.type", f"unknown input type {kind!r}", f"choose one of {', '.join(sorted(INPUT_TYPES))}"
        )
    return INPUT_TYPES[kind]


def build_input(cfg: Mapping[str, Any], vocab_size: int, d_model: int, init_std: float = 0.02) -> InputInterface:
    """Build the input interface named by `cfg.type` with the remaining keys as arguments.

    model.init_std reaches the learned tables as `init_std` and the fixed codes as
    `reference_std` (the RMS that scale=match_init matches), unless the input config sets them.
    """
    cls = input_type(cfg)
    kwargs = {k: v for k, v in cfg.items() if k not in _META_KEYS}
    if cls is LearnedEmbedding:
        kwargs.pop("code_width", None)  # learned tables have no code width; null in the config
    rms_reference = kwargs.pop("rms_reference", None)
    if rms_reference is not None:
        kwargs["reference_std"], rms_label = reference_rms(cls, kwargs, rms_reference, vocab_size, d_model, init_std)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "vocab_size", "d_model"}
    for default_key in ("init_std", "reference_std"):
        if default_key in accepted and kwargs.get(default_key) is None:
            kwargs[default_key] = init_std
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ConfigError(
            f"input.{unknown[0]}",
            f"not a setting of input type {cfg.get('type')!r}",
            f"remove it or use one of {', '.join(sorted(accepted))}",
        )
    for key, value in kwargs.items():  # numpy would reject these with a message naming no field
        if key.endswith("_seed") and not (isinstance(value, int) and 0 <= value < 2**63):
            raise ConfigError(f"input.{key}", f"{value!r} is not a non-negative integer seed", f"set input.{key}>=0")
    if cls is CodeMap:  # the fixed code the map reads: built here, from its resolved settings
        kwargs["code"] = reference_code_module(kwargs.get("code"), vocab_size, d_model, init_std)
    if kwargs.get("init_code") is not None:  # only LearnedEmbedding takes it (else: unknown setting above)
        LearnedEmbedding.check_init(kwargs.get("init", "normal"), has_init_code=True)
        kwargs["init_code"] = reference_code(kwargs["init_code"], vocab_size, d_model, kwargs["init_std"])
    interface = cls(vocab_size=vocab_size, d_model=d_model, **kwargs)
    interface.finalize()
    if rms_reference is not None:
        interface.build_info["rms_reference"] = rms_label  # reaches results.json via properties()
    return interface


def reference_rms(cls: type[InputInterface], kwargs: Mapping[str, Any], reference: Any, vocab_size: int,
                  d_model: int, init_std: float) -> tuple[float, str]:
    """`rms_reference`: the input RMS (scaled, tiled) of another fixed code, as the reference_std
    that scale=match_init matches. Returns (rms, the reference's label)."""
    if not issubclass(cls, FixedCode):
        raise ConfigError("input.rms_reference", f"input type {cls.kind!r} has no scale to match",
                          "use rms_reference with a fixed code (binary, gf2, wide, random_fixed)")
    if str(kwargs.get("scale", 1.0)).strip().lower() != "match_init" or kwargs.get("reference_std") is not None:
        raise ConfigError("input.rms_reference", "only scale=match_init (without reference_std) uses it",
                          "set input.scale=match_init and drop input.reference_std, or drop rms_reference")
    code = reference_code(reference, vocab_size, d_model, init_std, field="input.rms_reference")
    mean_square = (code.values.double() ** 2).mean(dim=0).numpy()  # (K,) of the scaled code
    return tiled_rms(mean_square, d_model), code.label


def reference_code_module(cfg: Any, vocab_size: int, d_model: int, init_std: float) -> FixedCode:
    """The fixed code a `code_map` input reads (`code:`), built from its settings."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("input.code", f"{cfg!r} is not a fixed code's settings",
                          "name a conf/input fixed code in input.code and build through build.build_model")
    code = build_input(cfg, vocab_size, d_model, init_std)
    if not isinstance(code, FixedCode):
        raise ConfigError("input.code.type", f"{code.kind!r} is not a fixed code",
                          "use a fixed code type (binary, gf2, wide, random_fixed, spelling)")
    return code


def reference_code(cfg: Any, vocab_size: int, d_model: int, init_std: float,
                   field: str = "input.init_code") -> ReferenceCode:
    """Build the fixed code another input refers to (`init_code`, `rms_reference`), and take its values."""
    if not isinstance(cfg, Mapping):
        raise ConfigError(field, f"{cfg!r} is a variant name, not its settings",
                          "build the model through build.build_model, which resolves conf/input names")
    code = build_input(cfg, vocab_size, d_model, init_std)
    if not isinstance(code, FixedCode):
        raise ConfigError(f"{field}.type", f"{code.kind!r} is not a fixed code",
                          "use a fixed code type (binary, gf2, wide, random_fixed)")
    values = code.scaled_code(code.all_ids()).to(device="cpu", dtype=torch.float32).contiguous()  # (V, K)
    name = cfg.get("name")
    label = name if isinstance(name, str) else ",".join(f"{k}={cfg[k]}" for k in sorted(cfg))
    return ReferenceCode(label=label, values=values)


def input_trainable_params(cfg: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
    """Trainable parameters of the input `cfg` describes, from shapes alone (a code_map builds its
    parameter-free code to learn the code's width)."""
    return input_type(cfg).trainable_count(cfg, vocab_size, d_model)


def input_trainable_split(cfg: Mapping[str, Any], vocab_size: int, d_model: int) -> dict[str, int]:
    """input_trainable_params split into {"token_specific", "shared"} (InputInterface.trainable_split)."""
    return input_type(cfg).trainable_split(cfg, vocab_size, d_model)
