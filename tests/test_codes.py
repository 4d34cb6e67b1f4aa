"""The study's fixed codes: exact bits, injectivity, GF(2) invertibility, no trainable inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fixedcode_study.build import build_model
from fixedcode_study.codes import FixedBinaryCode, GF2Code, LearnedEmbedding, build_input, minimal_code_width
from fixedcode_study.errors import ConfigError
from fixedcode_study.gf2 import gf2_inverse, gf2_matmul, gf2_rank

MICRO = {"vocab_size": 512, "n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 128, "max_seq_len": 32}


def unpack_ids(bits: np.ndarray) -> np.ndarray:
    """(N, K) little-endian bits -> ids."""
    return (bits.astype(np.int64) << np.arange(bits.shape[1])).sum(axis=1)


def test_minimal_width():
    assert [minimal_code_width(v) for v in (2, 3, 4, 5, 4096, 4097, 49_152, 65_536)] == [1, 2, 2, 3, 12, 13, 16, 16]


def test_binary16_is_the_canonical_little_endian_code():
    code = FixedBinaryCode(vocab_size=49_152, d_model=48, code_width=16)
    ids = torch.tensor([[0, 1, 2, 5, 49_151]])
    out = code(ids)  # (1, 5, 48)
    assert out.shape == (1, 5, 48)
    for j, token in enumerate(ids[0].tolist()):
        expected = [(token >> i) & 1 for i in range(16)]
        assert out[0, j, :16].tolist() == expected
        # tiled: coordinate c carries bit c mod 16
        assert out[0, j].tolist() == expected * 3
    assert set(out.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("vocab", [49_152, 65_536])
@pytest.mark.parametrize("kind", ["binary", "gf2"])
def test_codes_are_injective_over_the_whole_vocabulary(kind, vocab):
    layer = build_input({"type": kind, "code_width": 16}, vocab_size=vocab, d_model=64)
    assert layer.check_injective()
    # and through the torch forward, after tiling
    out = layer(torch.arange(vocab)[None])[0]  # (V, d)
    assert torch.unique(out, dim=0).shape[0] == vocab


def test_truncated_tiling_is_reported_and_keeps_every_bit():
    layer = FixedBinaryCode(vocab_size=4096, d_model=40, code_width=16)  # 16 + 16 + 8
    props = layer.properties()
    assert props["truncated"] is True and props["full_tiles"] == 2 and props["tile_factor"] == 2.5
    out = layer(torch.arange(4096)[None])[0]
    assert torch.equal(out[:, 32:40], out[:, :8])
    assert torch.unique(out, dim=0).shape[0] == 4096


def test_gf2_matrix_full_rank_weights_and_inverse_recovers_ids():
    layer = GF2Code(vocab_size=49_152, d_model=64, code_width=16, matrix_seed=12345, min_weight=4, affine=True)
    a, b = layer.matrix_np, layer.shift_np
    assert gf2_rank(a) == 16 and layer.properties()["gf2_rank"] == 16
    assert a.sum(axis=0).min() >= 4 and a.sum(axis=1).min() >= 4
    ids = np.arange(49_152)
    y = layer(torch.from_numpy(ids)[None])[0, :, :16].numpy().astype(np.uint8)  # (V, 16)
    c = gf2_matmul((y ^ b), gf2_inverse(a).T)  # A^-1 (y xor b)
    assert np.array_equal(unpack_ids(c), ids)
    assert np.array_equal(gf2_matmul(a, gf2_inverse(a)), np.eye(16, dtype=np.int64))


def test_gf2_matrix_is_a_function_of_its_seed():
    one = GF2Code(4096, 64, matrix_seed=12345)
    same = GF2Code(4096, 64, matrix_seed=12345)
    other = GF2Code(4096, 64, matrix_seed=7)
    assert np.array_equal(one.matrix_np, same.matrix_np)
    assert one.properties()["matrix_sha256"] == same.properties()["matrix_sha256"]
    assert one.properties()["matrix_sha256"] != other.properties()["matrix_sha256"]
    assert not one.affine and one.properties()["affine"] is False


@pytest.mark.parametrize("kind", ["binary16", "gf2"])
def test_fixed_inputs_have_no_trainable_parameters_and_never_get_gradients(kind):
    cfg = {"binary16": {"type": "binary", "code_width": 16}, "gf2": {"type": "gf2", "code_width": 16}}[kind]
    model = build_model(MICRO, cfg)
    assert sum(p.numel() for p in model.input.parameters()) == 0
    before = {k: v.clone() for k, v in model.input.state_dict().items()}
    x = torch.randint(0, 512, (2, 16))
    model(x).logsumexp(-1).sum().backward()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    opt.step()
    after = model.input.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # codes never change
    assert all(p.grad is not None for p in model.blocks.parameters())


def test_learned_input_is_trainable_and_gets_gradients():
    model = build_model(MICRO, {"type": "learned"})
    assert isinstance(model.input, LearnedEmbedding)
    table = model.input.table.weight
    assert table.requires_grad and table.numel() == 512 * 64
    x = torch.randint(0, 512, (2, 16))
    model(x).logsumexp(-1).sum().backward()
    assert table.grad is not None and table.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "cfg, vocab, d_model, field",
    [
        ({"type": "binary", "code_width": 8}, 4096, 64, "input.code_width"),
        ({"type": "gf2", "code_width": 12}, 8192, 64, "input.code_width"),
        ({"type": "embedding"}, 512, 64, "input.type"),
        ({"type": "binary", "code_width": 16}, 512, 8, "model.d_model"),
        ({"type": "gf2", "code_width": 16, "min_weight": 16}, 512, 64, "input.min_weight"),
        ({"type": "binary", "code_width": 16, "bogus": 1}, 512, 64, "input.bogus"),
        ({"type": "gf2", "code_width": 16, "matrix_seed": -1}, 512, 64, "input.matrix_seed"),
    ],
)
def test_bad_configurations_fail_with_one_line_naming_the_field(cfg, vocab, d_model, field):
    with pytest.raises(ConfigError) as info:
        build_input(cfg, vocab_size=vocab, d_model=d_model)
    message = str(info.value)
    assert message.startswith(field + ":") and "\n" not in message
    assert info.value.field == field


def test_width_error_names_both_numbers():
    with pytest.raises(ConfigError, match=r"8 bits .* 4096 token IDs"):
        build_input({"type": "binary", "code_width": 8}, vocab_size=4096, d_model=64)
