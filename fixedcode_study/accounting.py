"""Accounting: what a model has and what a token costs, each fact computed in one place.

- `parameter_groups(model)`: parameter counts per group (input, body, head; total and trainable),
  the study's headline numbers. Every parameter is in exactly one of input / body / head.
- `optimizer_group(name, ...)` / `optimizer_groups(model, optim)`: the one rule that puts every
  trainable parameter into exactly one AdamW group (input table, head, decayed matrices, norms),
  used by training (LanguageModelTask) and by the benchmark's reference model alike.
- `flops_per_token(config, seq_len, head_flops)`: training FLOPs per token, one formula, PaLM's
  (Chowdhery et al. 2022, arXiv:2204.02311, appendix B): 6 N + 12 * n_layer * n_head * head_dim *
  seq_len, where N counts the weights that multiply activations (block projections and the untied
  head). Another output head (heads package) replaces the head's 6 V d by its own count. The attention term counts QK^T and AV without the causal halving, as PaLM and nanoGPT do.
  Input lookups (a learned table or a computed code) and norm scales are not matmuls: no FLOPs.
- `block_params` / `body_params` / `matmul_params`: the same counts from shapes alone (no model
  built), used by size matching and checked against built models by the tests.
- `adamw_state_bytes(model, groups)`: bytes of fp32 AdamW training state (weights, gradients,
  two moments), from numel and dtype, so it works on the meta device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

import torch

if TYPE_CHECKING:
    from .model import Decoder, ModelConfig

FLOPS_FORMULA = ("PaLM (Chowdhery et al. 2022, appendix B): 6N + 12*n_layer*n_head*head_dim*seq_len per training "
                 "token; N = matmul weights (block projections + untied head), input lookups and norms excluded")

# Our Decoder's parameter names: the input interface and the head are groups of their own.
DECODER_PREFIXES = {"input": "input.", "head": "head."}
OPTIMIZER_GROUPS = ("input", "head", "decay", "no_decay")


# -- counts from shapes ------------------------------------------------------------------------------
def block_params(cfg: "ModelConfig") -> int:
    """Parameters of one decoder block: fused qkv + output projection + the MLP + two RMSNorm scales."""
    return block_matmul_params(cfg) + 2 * cfg.d_model


# d x d_ff matrices per MLP (model.MLPS): SwiGLU's gate, up and down; the GELU MLP's up and down.
MLP_MATRICES = {"swiglu": 3, "gelu": 2}


def mlp_params_per_unit(cfg: "ModelConfig") -> int:
    """Parameters one unit of d_ff adds to one block's MLP (d per matrix)."""
    return MLP_MATRICES[cfg.mlp] * cfg.d_model


def block_matmul_params(cfg: "ModelConfig") -> int:
    d, hd = cfg.d_model, cfg.head_dim
    attn = d * (cfg.n_head + 2 * cfg.kv_heads) * hd + cfg.n_head * hd * d
    return attn + mlp_params_per_unit(cfg) * cfg.d_ff


def body_params(cfg: "ModelConfig") -> int:
    """Blocks plus the final norm (the `body` group of parameter_groups)."""
    return cfg.n_layer * block_params(cfg) + cfg.d_model


def head_params(cfg: "ModelConfig") -> int:
    return cfg.d_model * cfg.vocab_size  # untied, no bias


def matmul_params(cfg: "ModelConfig") -> int:
    """N of the FLOPs formula: every block projection and the head."""
    return cfg.n_layer * block_matmul_params(cfg) + head_params(cfg)


def flops_per_token(cfg: "ModelConfig", seq_len: int, head_flops: int | None = None) -> dict[str, int]:
    """Training FLOPs per token (forward + backward), see FLOPS_FORMULA. head_flops: the output
    head's own count (heads.output_flops_per_token); None = the untied head's 6 V d."""
    dense = 6 * matmul_params(cfg)
    if head_flops is not None:
        dense += int(head_flops) - 6 * head_params(cfg)
    attention = 12 * cfg.n_layer * cfg.n_head * cfg.head_dim * int(seq_len)
    return {"dense_6N": dense, "attention": attention, "total": dense + attention}


# -- counts of a built model ---------------------------------------------------------------------------
def module_group(name: str, prefixes: Mapping[str, str] = DECODER_PREFIXES) -> str:
    """input, head or body: the part of the model a parameter belongs to (the one naming rule that
    both the counts and the optimizer groups follow)."""
    if name.startswith(prefixes["input"]):
        return "input"
    if name.startswith(prefixes["head"]):
        return "head"
    return "body"


def parameter_groups(model: "Decoder") -> dict[str, int]:
    """Parameter accounting per group (the study's headline numbers).

    total: every parameter tensor (trainable or frozen; buffers such as a GF(2) matrix are not
    parameters). input_trainable: trainable parameters of the input interface. head: the output
    head's own (a tied head owns none: its table is counted under input). body: blocks and final norm.
    token_specific_trainable: trainable parameters in tensors with a dimension of size V.
    input_token_specific_trainable / input_shared_trainable: the input's trainable parameters split as
    its interface declares (input_split).
    """
    def count(params: Iterable[torch.nn.Parameter], trainable_only: bool = False) -> int:
        return sum(p.numel() for p in params if p.requires_grad or not trainable_only)

    by_group: dict[str, list[torch.nn.Parameter]] = {"input": [], "body": [], "head": []}
    for name, p in model.named_parameters():
        by_group[module_group(name)].append(p)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    # Token-specific: a trainable tensor with one row (or column) per token ID, the study's question
    # (the input table, an untied head); a fixed or bit-chain head and every fixed code have none.
    token_specific = [p for p in model.parameters() if vocab is not None and vocab in p.shape]
    return {
        "total": count(model.parameters()),
        "trainable": count(model.parameters(), trainable_only=True),
        "input_total": count(by_group["input"]),
        "input_trainable": count(by_group["input"], trainable_only=True),
        "body": count(by_group["body"]),
        "head": count(by_group["head"]),
        "head_trainable": count(by_group["head"], trainable_only=True),
        "token_specific_trainable": count(token_specific, trainable_only=True),
        **input_split(model),
    }


def input_split(model: "Decoder") -> dict[str, int]:
    """The input's trainable parameters split as its interface declares them (token_specific_names):
    one row per token ID (a table, a low-rank factor) or shared by every token (a map over a code)."""
    interface = getattr(model, "input", None)
    if interface is None or not hasattr(interface, "token_specific_names"):
        return {}
    names = interface.token_specific_names()
    trainable = [(n, p) for n, p in interface.named_parameters() if p.requires_grad]
    specific = sum(p.numel() for n, p in trainable if n in names)
    return {"input_token_specific_trainable": specific,
            "input_shared_trainable": sum(p.numel() for _, p in trainable) - specific}


# -- optimizer groups ------------------------------------------------------------------------------------
def optimizer_group(name: str, param: torch.nn.Parameter, prefixes: Mapping[str, str] = DECODER_PREFIXES) -> str:
    """The AdamW group of one parameter: the input table and the head are groups of their own (so
    whether they decay is a visible config choice); other matrices decay; vectors (norms) never do."""
    part = module_group(name, prefixes)
    if part != "body":
        return part
    return "decay" if param.dim() >= 2 else "no_decay"


# Segments that wrappers insert into parameter names (FSDP, activation checkpointing, torch.compile).
WRAPPER_SEGMENTS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def unwrapped_name(name: str) -> str:
    """A parameter's name as the unwrapped model spells it."""
    for segment in WRAPPER_SEGMENTS:
        name = name.replace(segment, "")
    return name


def optimizer_group_names(model: torch.nn.Module) -> dict[str, str]:
    """{parameter name: AdamW group} of an unwrapped model.

    Taken before a strategy wraps the model: FSDP flattens parameters to 1-D (use_orig_params),
    so a matrix could no longer be told from a norm scale afterwards.
    """
    prefixes = getattr(model, "optimizer_group_prefixes", DECODER_PREFIXES)
    return {unwrapped_name(name): optimizer_group(name, p, prefixes) for name, p in model.named_parameters()}


def optimizer_groups(model: torch.nn.Module, optim: Mapping[str, Any],
                     group_names: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """AdamW parameter groups for every trainable parameter of `model`, each in exactly one group.

    `group_names` (from optimizer_group_names on the unwrapped model) decides the groups when the
    model has been wrapped since. A model with other parameter names (the benchmark's Hugging Face
    reference) declares its input and head prefixes in an `optimizer_group_prefixes` attribute.
    """
    names = dict(group_names) if group_names is not None else optimizer_group_names(model)
    wd = float(optim["weight_decay"])
    decay_of = {
        "input": wd if optim.get("weight_decay_input", False) else 0.0,
        "head": wd if optim.get("weight_decay_head", True) else 0.0,
        "decay": wd,
        "no_decay": 0.0,
    }
    groups: dict[str, list[torch.nn.Parameter]] = {g: [] for g in OPTIMIZER_GROUPS}
    for name, p in model.named_parameters():
        if p.requires_grad:
            groups[names[unwrapped_name(name)]].append(p)
    return [{"params": ps, "weight_decay": decay_of[g], "name": g} for g, ps in groups.items() if ps]


# -- training-state bytes -------------------------------------------------------------------------------------
def adamw_state_bytes(model: torch.nn.Module, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes of fp32 training state per AdamW parameter group: trainable parameters carry the
    weight, its gradient and two moments (16 bytes each); frozen ones only the weight; buffers as
    stored. Sizes come from numel and dtype, so a meta-device model (1.7B) costs nothing.
    """
    per_group = {}
    for g in groups:
        n = sum(p.numel() for p in g["params"])
        b = sum(p.numel() * p.element_size() for p in g["params"])
        per_group[g["name"]] = {"params": n, "param_bytes": b, "grad_bytes": b, "adam_moment_bytes": 2 * b}
    trainable_ids = {id(p) for g in groups for p in g["params"]}
    param_bytes = sum(g["param_bytes"] for g in per_group.values())
    out: dict[str, Any] = {
        "groups": per_group,
        "trainable_params": sum(g["params"] for g in per_group.values()),
        "trainable_param_bytes": param_bytes,
        "grad_bytes": param_bytes,
        "adam_moment_bytes": 2 * param_bytes,
        "frozen_param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()
                                  if id(p) not in trainable_ids),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
    }
    out["total_bytes"] = 4 * param_bytes + out["frozen_param_bytes"] + out["buffer_bytes"]
    return out
