"""What a configured run costs: tokens, steps, batch split and training FLOPs.

`recipe_summary(cfg)` is pure arithmetic on the composed config plus a shapes-only model build
(meta device), so it is instant even for the 1.7B preset. FLOPs follow Kaplan et al. (2020,
arXiv:2001.08361, Table 1): per training token, 6N for the matmuls of N non-embedding parameters
(forward 2N, backward 4N) plus 6 * n_layer * seq_len * d_model for attention scores and the
weighted sum (QK^T and AV, counted without the causal-mask halving, as Kaplan does). Input
lookups (a learned table or a fixed code) cost no FLOPs, so N excludes the input interface and
includes the untied output head.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from .build import build_model
from .distributed import plan_batch
from .model import parameter_groups


def flops_per_token(params: dict[str, int], n_layer: int, d_model: int, seq_len: int) -> dict[str, int]:
    """Training FLOPs per token (Kaplan et al.): 6N dense + 6 L T d attention; N = body + head."""
    dense = 6 * (params["body"] + params["head"])
    attention = 6 * n_layer * seq_len * d_model
    return {"dense_6N": dense, "attention": attention, "total": dense + attention}


def recipe_summary(cfg: DictConfig) -> dict[str, Any]:
    plan = plan_batch(cfg)
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.input)
    params = parameter_groups(model)
    mcfg = model.config
    matmul_params = params["body"] + params["head"]  # N: every parameter that multiplies activations
    per_token = flops_per_token(params, mcfg.n_layer, mcfg.d_model, plan.seq_len)
    tokens = plan.max_steps * plan.tokens_per_step  # the budget rounded up to whole steps
    total = per_token["total"] * tokens
    return {
        "tokens_budget": int(cfg.train.tokens),
        "tokens_trained": tokens,
        "steps": plan.max_steps,
        "global_batch_tokens": plan.tokens_per_step,
        "global_batch_sequences": plan.tokens_per_step // plan.seq_len,
        "seq_len": plan.seq_len,
        "micro_batch_per_device": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        "world_size": plan.world,
        "flops_params_N": matmul_params,
        "flops_per_token": per_token,
        "flops_total": float(total),
        "flops_total_readable": f"{total:.3e}",
        "flops_method": "Kaplan et al. 2020: 6N + 6*n_layer*seq_len*d_model per token (N excludes input lookups)",
    }
