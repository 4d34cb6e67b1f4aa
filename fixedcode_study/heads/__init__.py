"""Output heads: modules that map final hidden states (…, d_model) to logits over V token IDs.

The study's default and the paper's head is `untied`; the others are an opt-in axis (`output=`),
asking whether the model needs token-specific trainable parameters on the output side too:

linear.py  (token-specific: a V x d_model weight matrix)
- `untied`    a trainable V x d projection (the default; `head.weight`, as it always was)
- `tied`      the learned input table is the head (a fixed input has no table: refused)
fixed.py   (no trainable parameter depends on V)
- `fixed`     logits = C (P h): a fixed V x K code C, a trainable K x d projection P; rank <= K
bitchain.py (no trainable parameter depends on V; exactly normalised over the valid IDs)
- `bitchain`  p(v | h) = prod_k p(b_k(v) | b_<k(v), h) over the token's fixed code bits

The code of a `fixed` or `bitchain` head is any fixed input code (`output.code` names a conf/input
variant, resolved by config.resolve_output_references, or gives its settings), built by the inputs
package itself, so the head's code is bit for bit the input code of the same name.
Random initial values come from the Decoder's `head` stream (model.py), so at one seed every head
leaves the input and the blocks bitwise as they are (common random numbers across heads).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from ..inputs import InputInterface, build_input
from .base import OutputHead
from .bitchain import BitChainHead
from .fixed import FixedCodeHead, parse_head_scale
from .linear import TiedHead, UntiedHead

__all__ = ["OUTPUT_TYPES", "DEFAULT_OUTPUT", "OutputHead", "UntiedHead", "TiedHead", "FixedCodeHead", "BitChainHead",
           "build_output", "is_default_output", "output_code_width", "output_flops_per_token", "output_trainable_params",
           "output_token_specific_params", "check_output"]

OUTPUT_TYPES: dict[str, type[OutputHead]] = {
    "untied": UntiedHead, "tied": TiedHead, "fixed": FixedCodeHead, "bitchain": BitChainHead,
}
DEFAULT_OUTPUT = {"name": "untied", "type": "untied"}
_SETTINGS = {"untied": set(), "tied": set(), "fixed": {"code", "scale"}, "bitchain": {"code"}}
_META_KEYS = {"name", "type", "description"}


def is_default_output(cfg: Mapping[str, Any] | None) -> bool:
    """The untied head with no settings: the head every job had before the axis existed."""
    return not cfg or (cfg.get("type", "untied") == "untied" and not set(cfg) - _META_KEYS)


def output_type(cfg: Mapping[str, Any]) -> type[OutputHead]:
    kind = cfg.get("type", "untied")
    if kind not in OUTPUT_TYPES:
        raise ConfigError("output.type", f"unknown output type {kind!r}", f"choose one of {', '.join(OUTPUT_TYPES)}")
    unknown = sorted(set(cfg) - _META_KEYS - _SETTINGS[kind])
    if unknown:
        allowed = ", ".join(sorted(_SETTINGS[kind])) or "none"
        raise ConfigError(f"output.{unknown[0]}", f"not a setting of output type {kind!r}",
                          f"remove it (settings of {kind}: {allowed})")
    if _SETTINGS[kind] & {"code"} and not isinstance(cfg.get("code"), Mapping):
        raise ConfigError("output.code", f"output type {kind!r} needs a code, got {cfg.get('code')!r}",
                          "set output.code to a fixed code of conf/input, e.g. binary16 or gf2")
    return OUTPUT_TYPES[kind]


def output_code_width(cfg: Mapping[str, Any], d_model: int) -> int:
    """K of the head's code from its settings alone (0 for the linear heads)."""
    code = cfg.get("code")
    if not isinstance(code, Mapping):
        return 0
    width = code.get("code_width")
    return int(d_model if width is None else width)


BINARY_CODE_TYPES = ("binary", "gf2", "wide")  # the inputs package's FixedBinaryCode types
FIXED_CODE_TYPES = BINARY_CODE_TYPES + ("random_fixed",)


def check_output(cfg: Mapping[str, Any], input_cfg: Mapping[str, Any]) -> None:
    """Every setting of the head checked before anything is built (the job spec calls it): an
    impossible pairing (output=tied with a fixed input), a code the head cannot use, a bad scale."""
    cls = output_type(cfg)
    if cls is TiedHead:
        TiedHead.check(input_cfg)
    if cls in (FixedCodeHead, BitChainHead):
        allowed = BINARY_CODE_TYPES if cls is BitChainHead else FIXED_CODE_TYPES
        kind = cfg["code"].get("type")
        if kind not in allowed:
            raise ConfigError("output.code", f"{_code_label(cfg['code'])!r} is a {kind} input, not a "
                              f"{'binary' if cls is BitChainHead else 'fixed'} code the {cls.kind} head can use",
                              f"use a conf/input variant of type {' / '.join(allowed)}, e.g. binary16 or gf2")
    if cls is FixedCodeHead:
        parse_head_scale(cfg.get("scale", "match_head"))


def output_trainable_params(cfg: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
    return output_type(cfg).trainable_count(cfg, vocab_size, d_model, output_code_width(cfg, d_model))


def output_token_specific_params(cfg: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
    return output_type(cfg).token_specific(cfg, vocab_size, d_model, output_code_width(cfg, d_model))


def output_flops_per_token(cfg: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
    return output_type(cfg).training_flops(cfg, vocab_size, d_model, output_code_width(cfg, d_model))


def _code_label(code_cfg: Mapping[str, Any]) -> str:
    name = code_cfg.get("name")
    return name if isinstance(name, str) else ",".join(f"{k}={code_cfg[k]}" for k in sorted(code_cfg))


def build_output(cfg: Mapping[str, Any] | None, vocab_size: int, d_model: int, init_std: float,
                 input_layer: InputInterface) -> OutputHead:
    """The head `cfg` describes (references resolved: `code` is a mapping), untied when cfg is empty."""
    cfg = dict(cfg or DEFAULT_OUTPUT)
    cls = output_type(cfg)
    if cls is UntiedHead:
        return UntiedHead(vocab_size, d_model)
    if cls is TiedHead:
        return TiedHead(vocab_size, d_model, input_layer)
    try:
        code = build_input(cfg["code"], vocab_size, d_model, init_std)
    except ConfigError as error:  # the code's own message, under the head's field
        raise ConfigError(f"output.code.{error.field.removeprefix('input').lstrip('.')}".rstrip("."),
                          error.problem, error.fix) from None
    if cls is FixedCodeHead:
        return FixedCodeHead(vocab_size, d_model, code, _code_label(cfg["code"]), cfg.get("scale", "match_head"))
    return BitChainHead(vocab_size, d_model, code, _code_label(cfg["code"]))
