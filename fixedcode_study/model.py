"""The shared decoder: a Llama/SmolLM2-style Transformer with a pluggable input interface.

RMSNorm (pre-norm), rotary position embeddings (Llama's rotate-half convention, so weights map
one-to-one onto Hugging Face's LlamaForCausalLM), a SwiGLU MLP (`model.mlp: swiglu`, the default)
or a plain GELU MLP (`model.mlp: gelu`: the paper's earlier version, conf/model/paper_v1.yaml;
no Llama equivalent, so the Hugging Face export and the bench's reference refuse it), causal
attention through scaled_dot_product_attention, no biases. Two parts are pluggable: `self.input` (token IDs -> input
vectors, the inputs package), the part the study varies, and `self.head` (final hidden states ->
logits, the heads package), the paper's untied V x d projection unless `output=` asks otherwise.

Shapes: B batch, T sequence, d d_model, H heads, Hkv key/value heads, D head dim, V vocabulary.

Init with common random numbers. Every random initial value is drawn from a torch.Generator of
its own *stream*, seeded from (seed, stream name) by a stable hash (`init_stream_seed`):
  input      the input interface's draws (a learned table; fixed codes draw nothing here)
  blocks.i   block i's matrices, in registration order: qkv, proj (attention), then the MLP's
             (SwiGLU: gate_up, down; GELU: up, down)
  head       the output head's draws (untied: its V x d matrix; fixed: P; bitchain: a, then m)
(accounting.module_group's input / body / head, with the body split per block; the norms start
at 1 and draw nothing.) No stream depends on another's shapes, so at one seed:
  - every input variant on the same body shapes gets bitwise identical blocks and head, and every
    output head bitwise identical input and blocks;
  - a size-matched body shares the head and the attention weights of every block it has in common
    (attention is drawn before the MLP); a deeper one (size_match_by=n_layer) shares whole blocks
    0..n_layer-1 when d_ff is unchanged. A wider d_ff changes the MLP matrices' shapes, so those
    cannot match: they are fresh draws from the same stream.
Random fixed codes keep their own seeds (gf2 matrix_seed, random_fixed/wide code_seed, binary
permutation_seed): the code is part of the variant, not of the init.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from .inputs import InputInterface, init_normal_
from .errors import ConfigError
from .heads import OutputHead, UntiedHead

INIT_SCHEME = "per_group_generators"
MLP_TYPES = ("swiglu", "gelu")
INIT_DERIVATION = "int.from_bytes(sha256(f'{seed}:{stream}').digest()[:8], 'little') & (2**63 - 1)"


def init_stream_seed(seed: int, stream: str) -> int:
    """The generator seed of one init stream (INIT_DERIVATION): stable across processes and
    Python versions (unlike hash()), and below 2^63 so it stays an int64 in JSON readers."""
    digest = hashlib.sha256(f"{int(seed)}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def init_streams(n_layer: int) -> list[str]:
    return ["input", *(f"blocks.{i}" for i in range(n_layer)), "head"]


def init_record(seed: int, n_layer: int) -> dict[str, Any]:
    """How the init was drawn, for results.json["init"]: the scheme, the seed and every stream's seed."""
    return {"scheme": INIT_SCHEME, "seed": int(seed), "derivation": INIT_DERIVATION,
            "groups": {name: init_stream_seed(seed, name) for name in init_streams(n_layer)}}


def init_generator(seed: int, stream: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(init_stream_seed(seed, stream))


@dataclass
class ModelConfig:
    vocab_size: int = 4096
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int | None = None  # None = n_head (multi-head); fewer = grouped-query attention
    d_model: int = 128
    d_ff: int = 384  # the MLP's hidden width
    max_seq_len: int = 256
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02
    # The MLP: "swiglu" (gated, three d x d_ff matrices) or "gelu" (two). Only presets that want
    # gelu set the key: a preset without it is swiglu, so adding the option left the resolved
    # config, and with it the fingerprint, of every earlier job unchanged.
    mlp: str = "swiglu"

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
        if self.mlp not in MLP_TYPES:
            raise ConfigError("model.mlp", f"unknown MLP {self.mlp!r}", f"use one of {', '.join(MLP_TYPES)}")
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


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gqa: bool) -> torch.Tensor:
    """Causal scaled dot-product attention; q (B, H, T, D), k and v (B, Hkv, T, D) -> (B, H, T, D).

    On CPU under bf16 autocast the scores are computed in fp32: torch's CPU flash-attention kernel
    is several times slower in bf16 than in fp32 (its backward especially: 12.6 vs 2.2 ms per call
    at cpu_tiny), and fp32 scores are the accurate choice anyway. Autocast would cast the inputs to
    bf16 whatever their dtype (q and k arrive in fp32 from the fp32 rotary tables, v in bf16), so it
    is kept out of it. fp32 runs and GPUs are untouched (there bf16 attention is fast).

    Without grouped-query heads that is done by calling the kernel F.scaled_dot_product_attention
    picks for these inputs, torch's CPU flash kernel, directly: autocast has no rule for it, so it
    runs on the fp32 inputs as given, and the numbers are the same to the bit. Switching autocast
    off instead (kept for grouped-query heads) puts an autocast region into the compiled graph,
    which AOTAutograd's cache refuses ("Unsupported call_function target _enter_autocast"), so
    every job traced and partitioned the model's graphs again, 2-3 s a job with a warm cache.
    """
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        q, k, v = q.float(), k.float(), v.float()
        if not gqa and _flash_takes(q, k, v):
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)[0]
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)


def _flash_takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether F.scaled_dot_product_attention would pick the CPU flash kernel for `attention`'s inputs
    (4-d, one head size, no mask, no dropout): unit stride in the last dimension, and flash not
    switched off (torch.backends.cuda.enable_flash_sdp, which governs the CPU kernel too). Otherwise
    it falls back to its math kernel, and so does `attention`."""
    return q.stride(-1) == k.stride(-1) == v.stride(-1) == 1 and _flash_enabled()


@torch.compiler.assume_constant_result  # a bool dynamo cannot trace: read when the graph is traced
def _flash_enabled() -> bool:
    return torch.backends.cuda.flash_sdp_enabled()


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
        y = attention(q, k, v, gqa=Hkv != H)  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
        return self.proj(y)


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)  # fused gate and up
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, T, d_ff) each
        return self.down(F.silu(gate) * up)  # (B, T, d)


class GELUMLP(nn.Module):
    """The GPT-2 / nanoGPT MLP without biases: down(gelu(up(x))), two matrices instead of SwiGLU's
    three, so at one d_ff it has 2/3 of SwiGLU's MLP parameters and FLOPs. Exact (erf) GELU."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))  # (B, T, d_ff) -> (B, T, d)


MLPS = {"swiglu": SwiGLU, "gelu": GELUMLP}


def require_gated_mlp(cfg: ModelConfig, what: str, fix: str) -> None:
    """Refuse, in one line naming model.mlp, a model whose MLP `what` (code written for Llama's
    gated MLP) cannot represent."""
    if cfg.mlp != "swiglu":
        raise ConfigError("model.mlp", f"{what} maps the MLP onto Llama's gated (SwiGLU) MLP; "
                          f"this model's is mlp={cfg.mlp}", fix)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLPS[cfg.mlp](cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """input interface -> n_layer blocks -> RMSNorm -> output head (untied unless given)."""

    def __init__(self, cfg: ModelConfig, input_layer: InputInterface, seed: int | None = None,
                 head: OutputHead | None = None):
        """seed: the init seed (see the module docstring); None = torch.initial_seed()."""
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
        self.head = UntiedHead(cfg.vocab_size, cfg.d_model) if head is None else head
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.init_seed = torch.initial_seed() if seed is None else int(seed)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Llama-style init: every linear weight N(0, init_std^2); norms start at 1 (as constructed).
        Each stream draws from its own generator (module docstring), so the values do not depend on
        which other parts exist or on the global RNG."""
        std = self.config.init_std
        self.input.reset_parameters(init_generator(self.init_seed, "input"))  # its own init, its own stream
        for i, block in enumerate(self.blocks):
            g = init_generator(self.init_seed, f"blocks.{i}")
            for p in block.parameters():  # qkv, proj, then the MLP's (gate_up or up), down
                if p.dim() == 2:
                    init_normal_(p, std, g)
        self.head.reset_parameters(init_generator(self.init_seed, "head"), std)

    def init_record(self) -> dict[str, Any]:
        """results.json["init"]: {"scheme", "seed", "derivation", "groups": {stream: generator seed}}."""
        return init_record(self.init_seed, self.config.n_layer)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) int64 -> final-norm hidden states (B, T, d): everything but the head.

        Evaluation applies the head only where a log-probability is needed, so it calls this.
        """
        T = idx.shape[1]
        if T > self.config.max_seq_len:
            raise ValueError(f"sequence length {T} exceeds model.max_seq_len={self.config.max_seq_len}")
        # Codes are computed in fp32; follow the weights' dtype when the model itself is cast
        # (model.to(bf16) for evaluation). Under autocast the weights stay fp32: a no-op.
        x = self.input(idx).to(self.norm.weight.dtype)  # (B, T, d)
        cos, sin = self.rope_cos[:T].to(x.dtype), self.rope_sin[:T].to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.norm(x)  # (B, T, d)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) int64 -> logits (B, T, V); with targets (B, T), a teacher-forced head's
        per-token NLL (B, T) in fp32 instead (head.teacher_forced: the bit chain), which never
        forms the (B, T, V) logits."""
        if targets is None:
            return self.head(self.features(idx))  # (B, T, V)
        return self.head.nll(self.features(idx), targets)  # (B, T)
