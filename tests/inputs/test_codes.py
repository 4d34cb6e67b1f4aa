"""The study's fixed codes: exact bits, injectivity, GF(2) invertibility, no trainable inputs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fixedcode_study.inputs
from fixedcode_study.build import build_model
from fixedcode_study.spec import OptimSpec
from fixedcode_study.errors import ConfigError
from fixedcode_study.inputs import FixedBinaryCode, GF2Code, LearnedEmbedding, build_input, minimal_code_width
from fixedcode_study.inputs.gf2 import gf2_inverse, gf2_matmul, gf2_rank
from fixedcode_study.training.task import LanguageModelTask

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


def expected_code(kind: str, layer, vocab: int, d_model: int) -> torch.Tensor:
    """(V, d) input vectors computed here, independently of the inputs package: the canonical bits
    (id >> i) & 1, for gf2 recoded as A c (xor b) mod 2 with A read from the run's matrix record."""
    ids = np.arange(vocab)
    c = np.array([[(i >> j) & 1 for j in range(16)] for i in ids], dtype=np.int64)  # (V, 16)
    if kind == "gf2":
        record = layer.matrix_record()
        a = np.array([[int(ch) for ch in row] for row in record["rows"]], dtype=np.int64)  # (16, 16)
        c = c @ a.T
        if record["shift"] is not None:
            c = c + np.array([int(ch) for ch in record["shift"]])
        c = c % 2
    tiled = np.concatenate([c] * (d_model // 16 + 1), axis=1)[:, :d_model]
    return torch.from_numpy(tiled.astype(np.float32))


def training_optimizer(model) -> torch.optim.Optimizer:
    """The optimizer training builds (LanguageModelTask's AdamW groups), at a large learning rate
    and with decay on the input group, so a trainable code would visibly move."""
    optim = OptimSpec.of({"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "weight_decay_input": True,
                          "weight_decay_head": True, "warmup_fraction": 0.0, "min_lr_ratio": 0.1})
    task = LanguageModelTask(model, optim, max_steps=8, tokens_per_step=64,
                             token_bytes=torch.ones(MICRO["vocab_size"]))
    return task.configure_optimizers()["optimizer"]


@pytest.mark.parametrize("kind", ["binary16", "gf2"])
def test_fixed_codes_never_change_under_training(kind):
    """A few real optimizer steps on a test_micro model: every ID's input vector afterwards is still
    the code computed independently here (fails if the code became trainable, or changed)."""
    cfg = {"binary16": {"type": "binary", "code_width": 16}, "gf2": {"type": "gf2", "code_width": 16}}[kind]
    torch.manual_seed(0)
    model = build_model(MICRO, cfg)
    V, d = MICRO["vocab_size"], MICRO["d_model"]
    expected = expected_code(kind, model.input, V, d)  # (V, d)
    body_before = [p.detach().clone() for p in model.blocks.parameters()]
    opt = training_optimizer(model)
    for _ in range(4):
        x = torch.randint(0, V, (4, 17))
        logits = model(x[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(not torch.equal(a, b) for a, b in zip(body_before, model.blocks.parameters()))  # it trained
    with torch.no_grad():
        after = model.input(torch.arange(V)[None])[0]  # (V, d)
    assert torch.equal(after, expected)


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


def test_no_input_module_reads_the_configuration():
    """conf/ is read by config.py and resolved by build.py; the inputs package only gets mappings
    (so it cannot import config, omegaconf or hydra, nor open a conf/ path)."""
    package = Path(fixedcode_study.inputs.__file__).parent
    files = sorted(package.glob("*.py"))
    assert {"__init__.py", "base.py", "learned.py", "binary.py", "gaussian.py", "tiling.py", "gf2.py"} <= {
        f.name for f in files}
    for path in files:
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                modules = []
            for module in modules:
                assert not re.search(r"(^|\.)config($|\.)|omegaconf|hydra|yaml", module), (path.name, module)
            if isinstance(node, ast.Name):
                assert node.id not in ("CONFIG_DIR", "load_option", "OmegaConf"), (path.name, node.id)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                assert not re.search(r"conf/\w+/|\.yaml", node.value), (path.name, node.value)


def test_build_input_wants_referenced_variants_resolved():
    with pytest.raises(ConfigError, match="build.build_model") as info:
        build_input({"type": "learned", "init": "code", "init_code": "binary16"}, vocab_size=512, d_model=64)
    assert info.value.field == "input.init_code"
