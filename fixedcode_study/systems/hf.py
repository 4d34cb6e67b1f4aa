"""Our Decoder as a Hugging Face `transformers` LlamaForCausalLM carrying the same weights.

Used as the reference implementation: parity tests (same logits), lm-eval's HFLM comparison
and the speed benchmark (which trains it through `HFCausalLM`, the adapter that lets
training.task.LanguageModelTask and accounting.optimizer_groups treat it like our Decoder). The mapping is exact because the decoder follows Llama's layout:
fused qkv / gate_up projections split into q,k,v / gate,up; rotate-half RoPE; fp32 RMSNorm.

A fixed-code input has no table, but its codes can be materialised into one (V x d) so the HF
model computes the same function: `embed_tokens.weight[i] = input(i)`. The head: untied is
`lm_head.weight`; tied is the input table under both names (tie_word_embeddings=True); a table-free
head (fixed, bitchain: fixedcode_study/heads/) has no LlamaForCausalLM equivalent, so its
parameters keep their own names under `lm_head.` for hub/modeling_fixedcode.py's head modules, and
to_hf_llama refuses it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import torch

from ..errors import ConfigError
from ..model import Decoder
from ..heads import TiedHead, UntiedHead


def hf_llama_config(model: Decoder):
    from transformers import LlamaConfig

    c = model.config
    return LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        intermediate_size=c.d_ff,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        num_key_value_heads=c.kv_heads,
        head_dim=c.head_dim,
        max_position_embeddings=c.max_seq_len,
        rms_norm_eps=c.norm_eps,
        rope_theta=c.rope_theta,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
        hidden_act="silu",
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=isinstance(model.head, TiedHead),
        initializer_range=c.init_std,
    )


@torch.no_grad()
def hf_state_dict(model: Decoder) -> dict[str, torch.Tensor]:
    """Our weights under LlamaForCausalLM's parameter names (a table-free head's under `lm_head.`,
    the module docstring)."""
    c = model.config
    q_out, kv_out = c.n_head * c.head_dim, c.kv_heads * c.head_dim
    ids = torch.arange(c.vocab_size, device=model.norm.weight.device)
    out = {
        "model.embed_tokens.weight": model.input(ids[None])[0].detach().clone(),  # (V, d)
        "model.norm.weight": model.norm.weight,
    }
    if isinstance(model.head, (UntiedHead, TiedHead)):  # tied: the table, which transformers ties to lm_head
        out["lm_head.weight"] = model.head.weight if isinstance(model.head, UntiedHead) else model.input.table.weight
    else:  # parameters only: the head's constants (a code) are the export's to describe (hub/export.py)
        out.update({f"lm_head.{name}": p for name, p in model.head.named_parameters()})
    for i, blk in enumerate(model.blocks):
        p = f"model.layers.{i}."
        q, k, v = blk.attn.qkv.weight.split([q_out, kv_out, kv_out], dim=0)
        gate, up = blk.mlp.gate_up.weight.chunk(2, dim=0)
        out.update({
            p + "input_layernorm.weight": blk.attn_norm.weight,
            p + "self_attn.q_proj.weight": q,
            p + "self_attn.k_proj.weight": k,
            p + "self_attn.v_proj.weight": v,
            p + "self_attn.o_proj.weight": blk.attn.proj.weight,
            p + "post_attention_layernorm.weight": blk.mlp_norm.weight,
            p + "mlp.gate_proj.weight": gate,
            p + "mlp.up_proj.weight": up,
            p + "mlp.down_proj.weight": blk.mlp.down.weight,
        })
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def to_hf_llama(model: Decoder, attn_implementation: str = "sdpa"):
    """A LlamaForCausalLM (fp32, eval mode) computing the same function as `model` (untied or tied head)."""
    from transformers import LlamaForCausalLM

    if not isinstance(model.head, (UntiedHead, TiedHead)):
        raise ConfigError("output", f"a {model.head.kind} head has no LlamaForCausalLM equivalent",
                          "use output=untied or tied for a plain-Llama reference (the export handles every head)")
    hf = LlamaForCausalLM(hf_llama_config(model))
    if attn_implementation:
        hf.config._attn_implementation = attn_implementation
    missing, unexpected = hf.load_state_dict(hf_state_dict(model), strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    if missing or unexpected:
        raise RuntimeError(f"HF conversion mismatch: missing={missing[:3]} unexpected={unexpected[:3]}")
    return hf.to(model.norm.weight.device).eval()


class HFCausalLM(torch.nn.Module):
    """A LlamaForCausalLM behind our Decoder's training interface, so the benchmark's reference
    trains through the very same LanguageModelTask and optimizer code as our models.

    forward(idx (B, T)) -> logits (B, T, V), as Decoder.forward. The HF model sits under the
    attribute `hf`, and `optimizer_group_prefixes` names its input table and head so that
    accounting.optimizer_groups puts them in the `input` / `head` groups as it does ours.
    """

    ATTR = "hf"
    # What LanguageModelTask reads of Decoder.head (heads.OutputHead.teacher_forced): HF's head is
    # the untied lm_head, trained through (B, T, V) logits. A plain class attribute, not a module:
    # no parameters, nothing in the state_dict.
    head: ClassVar[Any] = SimpleNamespace(teacher_forced=False)
    optimizer_group_prefixes: ClassVar[dict[str, str]] = {"input": f"{ATTR}.model.embed_tokens.", "head": f"{ATTR}.lm_head."}

    def __init__(self, hf):
        super().__init__()
        self.hf = hf  # must match ATTR: the prefixes above are relative to this module

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        # use_cache=False: a training step keeps no key/value cache (HF's default would build one).
        return self.hf(input_ids=idx, use_cache=False).logits
