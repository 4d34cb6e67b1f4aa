"""A Hugging Face Llama-family folder as a workbench Decoder (the inverse of systems/hf.py's mapping).

Used where a tool needs our own modules rather than transformers' (the probes read hidden states
through hooks on Decoder's blocks). Two kinds of folders load:
- a folder our export wrote (config.json `fixedcode_export` holds the workbench model and input
  configs, and the output head's for any head but the untied default): rebuilt with build_model
  exactly as trained, fixed code and head included. The input the configs rebuild must be the one
  config.json's `input_code` describes (its type, code, map and table: every field of the
  description equals what codes.input_code_spec writes for the rebuilt input), and its weights map
  back by the export's names: a map's `model.embed_tokens.map.<x>` -> `input.<x>` (code_map,
  learned_lowrank), a stored table `model.embed_tokens.code_values` -> `input.table.weight`
  (learned_lowdim, learned_lowrank) or, for a fixed table code, compared with the code the input
  config recomputes (a code_map's: its `input.code`), never loaded over it;
- any plain LlamaForCausalLM (e.g. SmolLM2): a learned-input Decoder with its table, q/k/v and
  gate/up fused the workbench way; a tied head becomes an untied copy (the same function).
Anything the Decoder cannot compute exactly (biases, rope scaling, another activation) is refused
by name rather than approximated. `checkpoint_from_hf` gives such a folder the shape of a loaded
workbench checkpoint (record/checkpoint.py's Checkpoint: the Decoder, its tokenizer.json, the configs
it was rebuilt from), for the commands that read one (generate hf=).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..build import build_model
from ..errors import ConfigError
from ..model import Decoder
from ..heads import FixedCodeHead, TiedHead, UntiedHead
from ..inputs import CodeMap
from ..record.checkpoint import EXPORT_META, TOKENIZER_FILE, Checkpoint
from .codes import input_code_spec


def _refuse(field: str, what: str) -> ConfigError:
    return ConfigError("hf", f"{field}={what} has no exact equivalent in the workbench decoder",
                       "use a Llama-architecture model without biases or rope scaling")


def workbench_configs(hf_config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(model config, input config) for build_model, from an HF config.json dict."""
    meta = hf_config.get(EXPORT_META) or {}
    if meta.get("model_config") and meta.get("input_config"):
        return dict(meta["model_config"]), dict(meta["input_config"])
    if hf_config.get("input_code") or hf_config.get("output_head"):  # ours, without the configs to rebuild it
        raise ConfigError("hf", "the folder describes a fixed-code input or head (`input_code`/`output_head`) but "
                          f"the folder's `{EXPORT_META}` holds no workbench model and input configs",
                          "re-export the checkpoint with this version of the workbench")
    if hf_config.get("model_type") != "llama":
        raise ConfigError("hf", f"model_type {hf_config.get('model_type')!r} is not llama",
                          "use a Llama-architecture model (LlamaForCausalLM)")
    for key in ("attention_bias", "mlp_bias"):
        if hf_config.get(key):
            raise _refuse(key, "true")
    if hf_config.get("hidden_act", "silu") != "silu":
        raise _refuse("hidden_act", hf_config.get("hidden_act"))
    rope = hf_config.get("rope_scaling") or hf_config.get("rope_parameters") or {}
    if rope.get("rope_type", rope.get("type", "default")) not in ("default", None):
        raise _refuse("rope_scaling", rope.get("rope_type", rope.get("type")))
    theta = hf_config.get("rope_theta", rope.get("rope_theta", 10_000.0))
    d, heads = int(hf_config["hidden_size"]), int(hf_config["num_attention_heads"])
    if hf_config.get("head_dim") not in (None, d // heads):
        raise _refuse("head_dim", hf_config.get("head_dim"))
    model_cfg = {"name": hf_config.get("_name_or_path") or "hf", "vocab_size": int(hf_config["vocab_size"]),
                 "n_layer": int(hf_config["num_hidden_layers"]), "n_head": heads,
                 "n_kv_head": int(hf_config.get("num_key_value_heads") or heads), "d_model": d,
                 "d_ff": int(hf_config["intermediate_size"]),
                 "max_seq_len": int(hf_config.get("max_position_embeddings") or 2048),
                 "rope_theta": float(theta), "norm_eps": float(hf_config.get("rms_norm_eps", 1e-5)),
                 "init_std": float(hf_config.get("initializer_range", 0.02))}
    return model_cfg, {"name": "learned", "type": "learned"}


def workbench_output_config(hf_config: dict[str, Any]) -> dict[str, Any]:
    """The output head's config for build_model: our export's (absent for the untied head, as for
    any outside model: a tied outside Llama becomes an untied copy, the same function)."""
    return dict((hf_config.get(EXPORT_META) or {}).get("output_config") or {})


def _head_state(hf_state: dict[str, torch.Tensor], model: Decoder) -> dict[str, torch.Tensor]:
    """The head's parameters: lm_head.weight (or the tied table) for untied; nothing for tied (the
    table is the input's); a table-free head's under their own names (systems/hf.py)."""
    head = model.head
    if isinstance(head, UntiedHead):
        return {"head.weight": hf_state.get("lm_head.weight", hf_state.get("model.embed_tokens.weight"))}
    if isinstance(head, TiedHead):
        return {}
    state = {f"head.{name}": hf_state[f"lm_head.{name}"] for name, _ in head.named_parameters()
             if f"lm_head.{name}" in hf_state}
    if isinstance(head, FixedCodeHead) and "lm_head.code_values" in hf_state:  # a stored C (codes.head_code_spec)
        if not torch.equal(head.code.float(), hf_state["lm_head.code_values"]):
            raise ConfigError("hf", "the folder's output code differs from the one its output config rebuilds",
                              "re-export the checkpoint with this version of the workbench")
    return state


def check_input_description(hf_config: dict[str, Any], model: Decoder) -> None:
    """config.json's `input_code` (absent: a learned table) describes the input the workbench configs
    rebuilt: every field it holds equals the rebuilt input's own description (codes.input_code_spec:
    type, code width, value set, scale, bit matrix, map kind, hidden width, activation, trainable
    table), so a folder whose configs and weights disagree is refused by name, not loaded into
    another input. Fields a description lacks (an older export) are not asked for."""
    theirs = hf_config.get("input_code")
    ours, _ = input_code_spec(model.input)
    if (theirs is None) != (ours is None):
        raise ConfigError("hf", f"the folder's input_code ({'absent' if theirs is None else theirs.get('source')}) "
                          f"does not describe the {model.input.kind} input its input config rebuilds",
                          "re-export the checkpoint with this version of the workbench")
    differ = sorted(k for k in (theirs or {}) if _plain(theirs[k]) != _plain(ours.get(k)))
    if differ:
        raise ConfigError("hf", f"the folder's input_code differs from the {model.input.kind} input its input "
                          f"config rebuilds in {', '.join(differ)}",
                          "re-export the checkpoint with this version of the workbench")


def _plain(value: Any) -> Any:
    """A description value as JSON gives it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def _code_module(model: Decoder) -> Any:
    """The fixed code an exported code table holds: a code_map's own code (`input.code`), else the input."""
    return model.input.code if isinstance(model.input, CodeMap) else model.input


def _input_state(hf_state: dict[str, torch.Tensor], model: Decoder) -> dict[str, torch.Tensor]:
    """The input's parameters (and the buffers a fixed code cannot recompute), by the export's names
    (codes.input_code_spec): the table, a permutation, a map; a fixed code table is checked instead."""
    ours = model.state_dict()
    code_prefix = "input.code." if isinstance(model.input, CodeMap) else "input."
    state: dict[str, torch.Tensor] = {}
    if "model.embed_tokens.weight" in hf_state and "input.table.weight" in ours:
        state["input.table.weight"] = hf_state["model.embed_tokens.weight"]
    if "model.embed_tokens.id_permutation" in hf_state:  # an exported permuted binary code
        state[code_prefix + "id_permutation"] = hf_state["model.embed_tokens.id_permutation"]
    for key, value in hf_state.items():  # a trained map (code_map, learned_lowrank): map.<layer>.<tensor>
        if key.startswith("model.embed_tokens.map."):
            state["input." + key.removeprefix("model.embed_tokens.map.")] = value
    if "model.embed_tokens.code_values" in hf_state:  # an exported table code (codes.input_code_spec)
        values = hf_state["model.embed_tokens.code_values"]
        if "input.table.weight" in ours:  # learned_lowdim, learned_lowrank: the trained table itself
            state["input.table.weight"] = values
        else:  # a fixed table code (gaussian, random extra bits, spelling; a code_map's code)
            code = _code_module(model)
            if not torch.equal(code.scaled_code(code.all_ids()).float(), values):
                raise ConfigError("hf", "the folder's code table differs from the one its input config rebuilds",
                                  "re-export the checkpoint with this version of the workbench")
    return state


def _state_from_hf(hf_state: dict[str, torch.Tensor], model: Decoder) -> dict[str, torch.Tensor]:
    """HF parameter names -> ours; q/k/v and gate/up concatenated into the fused projections."""
    state = {"norm.weight": hf_state["model.norm.weight"], **_head_state(hf_state, model),
             **_input_state(hf_state, model)}
    for i in range(model.config.n_layer):
        p = f"model.layers.{i}."
        state.update({
            f"blocks.{i}.attn_norm.weight": hf_state[p + "input_layernorm.weight"],
            f"blocks.{i}.attn.qkv.weight": torch.cat([hf_state[p + f"self_attn.{x}_proj.weight"] for x in "qkv"]),
            f"blocks.{i}.attn.proj.weight": hf_state[p + "self_attn.o_proj.weight"],
            f"blocks.{i}.mlp_norm.weight": hf_state[p + "post_attention_layernorm.weight"],
            f"blocks.{i}.mlp.gate_up.weight": torch.cat([hf_state[p + "mlp.gate_proj.weight"],
                                                         hf_state[p + "mlp.up_proj.weight"]]),
            f"blocks.{i}.mlp.down.weight": hf_state[p + "mlp.down_proj.weight"],
        })
    return state


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConfigError("hf", f"{folder} holds no .safetensors weights", "save the model with save_pretrained()")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def decoder_from_hf(folder: str | Path) -> tuple[Decoder, dict[str, Any], dict[str, Any]]:
    """(Decoder in eval mode, fp32; its model config; its input config) from a local HF folder."""
    from transformers.utils import CONFIG_NAME

    folder = Path(folder)
    hf_config = json.loads((folder / CONFIG_NAME).read_text())
    model_cfg, input_cfg = workbench_configs(hf_config)
    model = build_model(model_cfg, input_cfg, output_cfg=workbench_output_config(hf_config))
    check_input_description(hf_config, model)
    state = _state_from_hf(_read_weights(folder), model)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Buffers are rebuilt from the configs (rope tables; a fixed code's matrices and tables from their
    # seeds, which export checked against the exported code); every parameter must come from the folder.
    parameters = dict(model.named_parameters())
    missing = [k for k in missing if k in parameters]
    if missing or unexpected:
        raise ConfigError("hf", f"{folder} does not map onto the workbench decoder (missing {missing[:3]}, "
                          f"unexpected {unexpected[:3]})", "use a Llama-architecture model")
    return model.eval(), model_cfg, input_cfg


def checkpoint_from_hf(folder: str | Path) -> Checkpoint:
    """A local HF folder as a loaded workbench checkpoint. The folder's end-of-sequence token is the
    end-of-text token (our exports set bos = eos = the end-of-text token training documents end with)."""
    from tokenizers import Tokenizer
    from transformers.utils import CONFIG_NAME

    folder = Path(folder)
    model, model_cfg, input_cfg = decoder_from_hf(folder)
    if not (folder / TOKENIZER_FILE).is_file():
        raise ConfigError("hf", f"{folder} has no {TOKENIZER_FILE}", "use a model with a fast (tokenizers) tokenizer")
    tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    hf_config = json.loads((folder / CONFIG_NAME).read_text())
    eos = hf_config.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos
    eot_token = tokenizer.id_to_token(eos) if isinstance(eos, int) else None
    config = {"model": model_cfg, "input": input_cfg, "output": workbench_output_config(hf_config) or None,
              "data": {"eot_token": eot_token}, EXPORT_META: hf_config.get(EXPORT_META) or {}}
    return Checkpoint(folder, model, tokenizer, config)
