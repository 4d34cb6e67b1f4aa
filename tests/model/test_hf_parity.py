"""Our Decoder and Hugging Face's LlamaForCausalLM compute the same function (fp32, CPU).

systems.hf.to_hf_llama copies our weights across (fixed codes through a materialised V x d table); the
logits must then agree to 1e-5. Every weight is randomised first, norms included (they start at
1, where a mis-mapped norm would go unnoticed), and at a larger std than init so that mistakes in
the attention path move the logits well past the tolerance.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from fixedcode_study.build import build_model  # noqa: E402
from fixedcode_study.config import compose  # noqa: E402
from fixedcode_study.systems.hf import hf_state_dict, to_hf_llama  # noqa: E402

ATOL = 1e-5
ARCH = {"vocab_size": 512, "n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 160, "max_seq_len": 48,
        "rope_theta": 10_000.0, "norm_eps": 1e-5, "init_std": 0.02}


def randomised_model(input_name: str, **arch):
    cfg = compose([f"input={input_name}"])
    torch.manual_seed(0)
    model = build_model({**ARCH, **arch}, cfg.input).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # RMSNorm weights
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.08)
    return model


def logits_pair(model, T: int = 40):
    hf = to_hf_llama(model)
    idx = torch.randint(0, model.config.vocab_size, (3, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(idx), hf(idx).logits


@pytest.mark.parametrize("input_name, n_kv_head", [
    ("learned", None),      # multi-head attention
    ("learned", 2),         # grouped-query attention, 2 query heads per KV head
    ("learned", 1),         # multi-query attention
    ("binary16", 2),        # fixed code through the materialised table, with GQA
    ("gf2", None),          # GF(2)-recoded fixed code
])
def test_logits_match_hf_llama(input_name, n_kv_head):
    model = randomised_model(input_name, n_kv_head=n_kv_head)
    ours, theirs = logits_pair(model)
    assert ours.shape == theirs.shape == (3, 40, ARCH["vocab_size"])
    assert ours.abs().max() > 0.5, "logits too small for the tolerance to mean anything"
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_a_tied_head_matches_a_tied_hf_llama():
    """output=tied: LlamaForCausalLM with tie_word_embeddings, the input table under both names."""
    cfg = compose(["input=learned", "output=tied"])
    torch.manual_seed(0)
    model = build_model({**ARCH, "n_kv_head": 2}, cfg.input, output_cfg=cfg.output).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(1.0 + 0.3 * torch.randn_like(p) if p.dim() == 1 else torch.randn_like(p) * 0.08)
    hf = to_hf_llama(model)
    assert hf.config.tie_word_embeddings and hf.lm_head.weight is hf.model.embed_tokens.weight
    ours, theirs = model(torch.arange(40)[None]), hf(torch.arange(40)[None]).logits
    assert ours.abs().max() > 0.5
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_full_context_length_matches():
    """Positions up to max_seq_len - 1: the rotary tables of both agree at the far end too."""
    model = randomised_model("learned", n_kv_head=2)
    ours, theirs = logits_pair(model, T=ARCH["max_seq_len"])
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_materialised_table_is_the_fixed_code():
    model = randomised_model("binary16")
    table = hf_state_dict(model)["model.embed_tokens.weight"]  # (V, d)
    ids = torch.tensor([0, 1, 2, 255, 511])
    assert torch.equal(table[ids], model.input(ids[None])[0])
    assert torch.equal(table[5, :16], torch.tensor([1.0, 0, 1] + [0] * 13))  # 5 = 0b101, little-endian


def test_parity_check_catches_a_wrong_mapping():
    """Swapping two heads' query rows is a plausible conversion bug; the comparison must see it."""
    model = randomised_model("learned", n_kv_head=2)
    hf = to_hf_llama(model)
    with torch.no_grad():
        q = hf.model.layers[0].self_attn.q_proj.weight
        hd = ARCH["d_model"] // ARCH["n_head"]
        q[:hd], q[hd:2 * hd] = q[hd:2 * hd].clone(), q[:hd].clone()
        idx = torch.randint(0, ARCH["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(2))
        diff = (model(idx) - hf(idx).logits).abs().max()
    assert diff > 100 * ATOL
