"""How an input interface or a table-free head is described in an exported folder's config.json
(`input_code`, `output_head`) with the extra tensors that go beside it: the one definition the
export writes (hub/export.py) and the import checks a folder against (hub/imported.py).
hub/modeling_fixedcode.py's module docstring defines the format.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ConfigError
from ..heads import BitChainHead, FixedCodeHead, TiedHead, UntiedHead
from ..inputs import (CodeMap, FixedBinaryCode, FixedCode, GF2Code, LearnedEmbedding, LearnedLowDim, LearnedLowRank,
                      WideCode)

__all__ = ["head_code_spec", "input_code_spec"]


def _rows(matrix: torch.Tensor) -> list[str]:
    """(R, C) 0/1 tensor -> R strings of C '0'/'1' characters (modeling_fixedcode.py reads them)."""
    return ["".join(str(int(v)) for v in row) for row in matrix.to(torch.int64).tolist()]


def input_code_spec(inp: Any) -> tuple[dict[str, Any] | None, dict[str, torch.Tensor]]:
    """(config.input_code, extra weights) of an input interface; (None, {}) for a learned table.

    Everything the modeling file needs to compute exactly what `inp.forward` computes
    (modeling_fixedcode.py's docstring defines the two kinds and the optional `map`). The extra
    weights are named relative to `model.embed_tokens.`: a map's under `map.` (`map.proj.weight`,
    and for an mlp `map.fc_in.weight`, `map.fc_in.bias`), trained parameters of the folder's model."""
    if isinstance(inp, LearnedEmbedding):
        return None, {}
    if isinstance(inp, CodeMap):  # the fixed code as it would be exported alone, then the map on its K values
        spec, tensors = input_code_spec(inp.code)
        if spec.get("map"):
            raise ConfigError("checkpoint", "a code_map reads another mapped input", "map a fixed code")
        spec.update(code_source=spec.get("source"), source=inp.kind, map=_map_spec(inp))
        return spec, {**tensors, **_map_weights(inp)}
    if isinstance(inp, LearnedLowRank):  # the trained V x r table is the code, its r x d map the linear map
        return ({"kind": "table", "code_width": int(inp.rank), "scale": 1.0, "source": inp.kind,
                 "trainable": bool(inp.trainable), "map": {"kind": "linear"}},
                {"code_values": inp.table.weight.detach().float().cpu().contiguous(), **_map_weights(inp)})
    width = int(inp.code_width)
    if isinstance(inp, LearnedLowDim):  # a trained V x K table, tiled: the table itself is the code
        return ({"kind": "table", "code_width": width, "scale": 1.0, "source": inp.kind},
                {"code_values": inp.table.weight.detach().float().cpu().contiguous()})
    if not isinstance(inp, FixedCode):
        raise ConfigError("checkpoint", f"input type {inp.kind!r} has no export", "export a learned or fixed-code model")
    spec: dict[str, Any] = {"code_width": width, "values": getattr(inp, "values", "01"),
                            "scale": float(inp.scale), "source": inp.kind}
    buffers: dict[str, torch.Tensor] = {}
    if isinstance(inp, WideCode) and inp.extra == "gf2":
        spec.update(kind="bits", id_bits=inp.minimal_width, matrix=_rows(inp.code_matrix), shift=None)
    elif isinstance(inp, GF2Code):
        shift = _rows(inp.gf2_shift[None])[0] if inp.affine else None  # one string
        spec.update(kind="bits", id_bits=width, matrix=_rows(inp.gf2_matrix), shift=shift)
    elif isinstance(inp, FixedBinaryCode) and not isinstance(inp, WideCode):
        spec.update(kind="bits", id_bits=width, matrix=None, shift=None)
    else:  # Gaussian codes, random extra bits: the (V, K) values are the code
        spec.update(kind="table")
        spec.pop("values")
        spec["scale"] = 1.0  # the table holds scaled values
        buffers["code_values"] = inp.scaled_code(inp.all_ids()).detach().float().cpu().contiguous()
    if getattr(inp, "id_permutation", None) is not None:
        spec["permuted"] = True
        buffers["id_permutation"] = inp.id_permutation.detach().cpu().to(torch.int64).contiguous()
    return spec, buffers


def _map_spec(inp: CodeMap) -> dict[str, Any]:
    """config.input_code.map of a code_map: {"kind": "linear"} or {"kind": "mlp", "hidden", "activation"}."""
    if inp.map_kind == "linear":
        return {"kind": "linear"}
    return {"kind": "mlp", "hidden": int(inp.hidden), "activation": inp.activation}


def _map_weights(inp: CodeMap | LearnedLowRank) -> dict[str, torch.Tensor]:
    """The map's trained weights, fp32, under the names FixedCodeInput's `map` gives them."""
    layers = ("fc_in", "proj") if getattr(inp, "map_kind", "linear") == "mlp" else ("proj",)
    return {f"map.{layer}.{name}": p.detach().float().cpu().contiguous()
            for layer in layers for name, p in getattr(inp, layer).named_parameters()}


def head_code_spec(head: Any) -> tuple[dict[str, Any] | None, dict[str, torch.Tensor]]:
    """(config.output_head, extra lm_head.* weights) of an output head; (None, {}) for untied and tied
    (LlamaForCausalLM's own lm_head). The head's code is described as an input code is
    (input_code_spec on the head's own code object, built from the resolved `output.code` by the
    inputs package), with the value set and scale the head applies:
    - fixed: C = code values x the head's scale (match_head or the number), which need not be the
      code's input scale; a table code (Gaussian, random extra bits) stores C itself, already scaled.
      Computed from the description rather than stored for bit codes, as the input is: the folder then
      holds no V-sized output tensor at all, and verify_export checks the computed C against the
      workbench head's buffer bit for bit (+-1 or 0 times one fp32 scale is exact either way).
    - bitchain: the bits themselves (values '01', scale 1): the chain reads bits, whatever value set
      the code has as an input; a table code stores the (V, K) bits."""
    if isinstance(head, (UntiedHead, TiedHead)):
        return None, {}
    if not isinstance(head, (FixedCodeHead, BitChainHead)):
        raise ConfigError("checkpoint", f"output head type {head.kind!r} has no export",
                          "export a model with an untied, tied, fixed or bitchain head")
    spec, buffers = input_code_spec(head._code)  # the head's code object (outputs/: not a submodule)
    if spec is None or spec.get("kind") not in ("bits", "table") or spec.get("map") or spec.get("trainable"):
        raise ConfigError("checkpoint", f"the {head.kind} head's code {head.code_label!r} has no export",
                          "export a head over a fixed binary or Gaussian code")
    if isinstance(head, FixedCodeHead):
        if spec["kind"] == "table":
            buffers["code_values"] = head.code.detach().float().cpu().contiguous()  # C, scaled
            spec["scale"] = 1.0
        else:
            spec["scale"] = float(head.scale)
    else:
        spec["values"], spec["scale"] = "01", 1.0
        if spec["kind"] == "table":
            buffers["code_values"] = torch.from_numpy(head._code.all_bits()).float().contiguous()
    spec["source"] = head.code_label
    return {"kind": head.kind, "code": spec}, buffers
