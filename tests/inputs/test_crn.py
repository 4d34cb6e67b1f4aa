"""Common random numbers: at one seed every input variant starts from the same body and head.

The init draws each stream (input, blocks.i, head) from a generator seeded by (seed, stream) alone
(model.py), so the variants of a comparison differ only in their input at step 0, and the build
leaves the global RNG as it found it.
"""

from __future__ import annotations

import hashlib

import lightning as L
import numpy as np
import pytest
import torch

from fixedcode_study.accounting import module_group
from fixedcode_study.build import build_model
from fixedcode_study.config import available, resolve_input_references
from fixedcode_study.config import compose as compose_config
from fixedcode_study.data.batches import RandomWindowBatches
from fixedcode_study.inputs import init_normal_
from fixedcode_study.model import INIT_SCHEME, init_stream_seed, init_streams

from helpers.vocabulary import with_vocabulary  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

SEED = 1


def built(input_name: str, seed: int | None = SEED, *extra: str):
    cfg = compose_config(["model=test_micro", f"input={input_name}", *extra])
    input_cfg = with_vocabulary(resolve_input_references(OmegaConf.to_container(cfg.input, resolve=True)),
                                cfg.model.vocab_size)
    return build_model(cfg.model, input_cfg, seed=seed)


def outside_input(model) -> dict[str, torch.Tensor]:
    """Body and head weights: every state entry outside the input interface."""
    return {k: v for k, v in model.state_dict().items() if module_group(k) != "input"}


LEARNED = outside_input(built("learned"))
SAME_BODY = [n for n in available("input") if "sizematched" not in n]


def test_every_same_shaped_variant_has_learneds_body_and_head_bitwise():
    assert {"learned", "binary16", "gf2", "binary16_permuted", "gaussian16", "frozen_learned"} <= set(SAME_BODY)
    for name in SAME_BODY:
        weights = outside_input(built(name))
        assert weights.keys() == LEARNED.keys(), name
        for key, value in weights.items():
            assert torch.equal(value, LEARNED[key]), (name, key)


def test_the_seed_changes_every_stream_and_streams_differ_from_each_other():
    other = outside_input(built("learned", seed=2))
    for key, value in LEARNED.items():
        if value.dim() == 2:
            assert not torch.equal(value, other[key]), key
    # blocks do not repeat each other's draws
    assert not torch.equal(LEARNED["blocks.0.attn.qkv.weight"], LEARNED["blocks.1.attn.qkv.weight"])


@pytest.mark.parametrize("name", ["binary16_sizematched", "gf2_sizematched", "binary16_sizematched_isoflop"])
def test_size_matched_body_shares_head_and_attention_not_the_wider_mlp(name):
    model = built(name)
    assert model.config.d_ff > 128  # test_micro's d_ff, widened
    weights = outside_input(model)
    assert torch.equal(weights["head.weight"], LEARNED["head.weight"])
    for i in range(model.config.n_layer):
        for part in ("attn.qkv.weight", "attn.proj.weight"):  # drawn before the MLP in each block
            assert torch.equal(weights[f"blocks.{i}.{part}"], LEARNED[f"blocks.{i}.{part}"]), (i, part)
        assert weights[f"blocks.{i}.mlp.down.weight"].shape != LEARNED[f"blocks.{i}.mlp.down.weight"].shape


def test_deeper_size_matched_body_repeats_the_shared_blocks_whole():
    # by n_layer alone (tolerance loosened so whole blocks can land), d_ff stays: blocks 0..1 are learned's
    model = built("binary16_sizematched", SEED, "input.size_match_by=n_layer", "input.size_match_tolerance=0.5")
    assert model.config.n_layer > 2 and model.config.d_ff == 128
    weights = outside_input(model)
    for key, value in LEARNED.items():
        if key.startswith(("blocks.0.", "blocks.1.", "head.")):
            assert torch.equal(weights[key], value), key
    assert not torch.equal(weights["blocks.2.attn.qkv.weight"], LEARNED["blocks.0.attn.qkv.weight"])


def test_learned_and_frozen_tables_draw_the_input_stream():
    """The table is N(0, init_std^2) drawn from the input stream's generator: the same at one seed
    for every learned-table variant, computed here straight from the stream seed."""
    g = torch.Generator().manual_seed(init_stream_seed(SEED, "input"))
    expected = torch.empty(512, 64).normal_(0.0, 0.02, generator=g)
    for name in ("learned", "frozen_learned"):
        assert torch.equal(built(name).input.table.weight.detach(), expected), name
    assert not torch.equal(built("learned", seed=2).input.table.weight.detach(), expected)


def test_init_record_names_every_stream_with_its_sha256_seed():
    model = built("gf2")
    record = model.init_record()
    assert record["scheme"] == INIT_SCHEME == "per_group_generators" and record["seed"] == SEED
    assert list(record["groups"]) == ["input", "blocks.0", "blocks.1", "head"] == init_streams(2)
    for stream, value in record["groups"].items():
        digest = hashlib.sha256(f"{SEED}:{stream}".encode()).digest()
        assert value == int.from_bytes(digest[:8], "little") % 2**63, stream
    assert len(set(record["groups"].values())) == 4


def test_streams_follow_the_accounting_groups():
    """Every drawn matrix's stream is its accounting.module_group (the body split per block)."""
    model = built("learned")
    for name, p in model.named_parameters():
        if p.dim() == 2:
            stream = name.split(".")[0] if not name.startswith("blocks.") else ".".join(name.split(".")[:2])
            assert stream in init_streams(model.config.n_layer), name
            assert module_group(name) == {"input": "input", "head": "head"}.get(stream, "body"), name


@pytest.mark.parametrize("name", ["learned", "binary16", "learned_codestats", "gaussian16"])
def test_build_consumes_no_global_randomness(name):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    built(name)
    assert torch.equal(torch.get_rng_state(), before)


def test_seed_defaults_to_the_global_seed_like_seed_everything_sets_it():
    L.seed_everything(7, verbose=False)  # what training does before it builds the model
    implicit = built("learned", seed=None)
    assert implicit.init_seed == 7 and implicit.init_record()["seed"] == 7
    explicit = built("learned", seed=7)
    for key, value in implicit.state_dict().items():
        assert torch.equal(value, explicit.state_dict()[key]), key


def test_normal_draw_is_the_same_on_any_dtype():
    g = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    fp32 = init_normal_(torch.empty(8, 8), 0.02, g())
    bf16 = init_normal_(torch.empty(8, 8, dtype=torch.bfloat16), 0.02, g())
    assert torch.equal(bf16, fp32.to(torch.bfloat16))


def test_data_order_ignores_the_global_rng(tmp_path):
    """Batches are a function of (seed, step, slot) only (data/batches.py): disturbing torch's and
    numpy's global generators, as a different model build could, changes nothing."""
    path = tmp_path / "train.bin"
    np.arange(10_000, dtype=np.uint16).tofile(path)
    windows = RandomWindowBatches(path, np.uint16, seq_len=16, batch_size=4, seed=SEED)
    first = windows.batch(3)
    torch.rand(1000)
    np.random.rand(1000)
    assert torch.equal(windows.batch(3), first)
    assert not torch.equal(RandomWindowBatches(path, np.uint16, 16, 4, seed=2).batch(3), first)
