"""The shared decoder: a Llama/SmolLM2-style Transformer with a pluggable input interface.

RMSNorm (pre-norm), rotary position embeddings (Llama's rotate-half convention, so weights map
one-to-one onto Hugging Face's LlamaForCausalLM), SwiGLU MLP, causal attention through
scaled_dot_product_attention, no biases, and an untied output head. The only part that differs
between the study's variants is `self.input` (see the inputs package).

Shapes: B batch, T sequence, d d_model, H heads, Hkv key/value heads, D head dim, V vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from .inputs import InputInterface
from .errors import ConfigError


@dataclass
class ModelConfig:
    vocab_size: int = 4096
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int | None = None  # None = n_head (multi-head); fewer = grouped-query attention
    d_model: int = 128
    d_ff: int = 384  # SwiGLU hidden width
    max_seq_len: int = 256
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> "ModelConfig":
        """Take the architecture keys of a model preset; presentation keys (name, source) are skipped."""
        names = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in cfg.items() if k in names})
        config.validate()
        return config

    def validate(self) -> None:
        if self.d_model % self.n_head:
            raise ConfigError(
                "model.n_head", f"d_model={self.d_model} is not divisible by n_head={self.n_head}",
                "pick n_head dividing d_model",
            )
        if self.n_head % self.kv_heads:
            raise ConfigError(
                "model.n_kv_head", f"n_head={self.n_head} is not a multiple of n_kv_head={self.kv_heads}",
                "pick n_kv_head dividing n_head",
            )
        if self.head_dim % 2:
            raise ConfigError(
                "model.d_model", f"head dim {self.head_dim} is odd; rotary embeddings need it even",
                "pick d_model / n_head even",
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rope_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables (T, D) in the rotate-half layout used by Llama."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)  # (T, D/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # (T, D)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D); rotate pairs (i, i + D/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos + rotated * sin


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 like Llama, so bf16 runs match the reference implementation.
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).type_as(x) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head, self.n_kv, self.head_dim = cfg.n_head, cfg.kv_heads, cfg.head_dim
        # One fused projection for q, k and v: one matmul instead of three.
        self.qkv = nn.Linear(cfg.d_model, (self.n_head + 2 * self.n_kv) * self.head_dim, bias=False)
        self.proj = nn.Linear(self.n_head * self.head_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H, Hkv, D = self.n_head, self.n_kv, self.head_dim
        # The fused output's rows are [q heads | k heads | v heads], so a view splits it into heads.
        qkv = self.qkv(x).view(B, T, H + 2 * Hkv, D)  # (B, T, H+2Hkv, D)
        qk, v = qkv.split([H + Hkv, Hkv], dim=2)
        # Rotate q and k in one pass (half the elementwise kernels of rotating them separately).
        qk = apply_rope(qk.transpose(1, 2), cos, sin)  # (B, H+Hkv, T, D)
        q, k = qk.split([H, Hkv], dim=1)  # (B, H, T, D), (B, Hkv, T, D)
        v = v.transpose(1, 2)  # (B, Hkv, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=Hkv != H)
        y = y.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
        return self.proj(y)


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)  # fused gate and up
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, T, d_ff) each
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """input interface -> n_layer blocks -> RMSNorm -> untied head."""

    def __init__(self, cfg: ModelConfig, input_layer: InputInterface):
        super().__init__()
        cfg.validate()
        if input_layer.vocab_size != cfg.vocab_size or input_layer.d_model != cfg.d_model:
            raise ConfigError(
                "input", f"built for V={input_layer.vocab_size}, d={input_layer.d_model} but the model has "
                f"V={cfg.vocab_size}, d={cfg.d_model}", "build the input from the model config",
            )
        self.config = cfg
        self.input = input_layer
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)  # never tied to the input
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Llama-style init: every linear weight N(0, init_std^2); norms start at 1."""
        for name, p in self.named_parameters():
            if p.device.type == "meta" or name.startswith("input."):
                continue  # the input interface owns its own init
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=self.config.init_std)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) int64 -> final-norm hidden states (B, T, d): everything but the head.

        Evaluation applies the head only where a log-probability is needed, so it calls this.
        """
        T = idx.shape[1]
        if T > self.config.max_seq_len:
            raise ValueError(f"sequence length {T} exceeds model.max_seq_len={self.config.max_seq_len}")
        # Codes are computed in fp32; follow the weights' dtype when the model itself is cast
        # (model.to(bf16) for evaluation). Under autocast the weights stay fp32: a no-op.
        x = self.input(idx).to(self.head.weight.dtype)  # (B, T, d)
        cos, sin = self.rope_cos[:T].to(x.dtype), self.rope_sin[:T].to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.norm(x)  # (B, T, d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) int64 -> logits (B, T, V)."""
        return self.head(self.features(idx))  # (B, T, V)
