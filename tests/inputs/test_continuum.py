"""The input continuum's variants (inputs/mapped.py, inputs/spelling.py): parameter counts by formula,
the spelling code's injectivity, fixed codes that stay fixed under the real optimizer, the exact
input RMS at init, and `vocabulary: data` resolved from the job's own tokenizer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.vocabulary import synthetic_vocabulary, with_vocabulary
from test_codes import MICRO, training_optimizer

from fixedcode_study.accounting import parameter_groups
from fixedcode_study.build import build_model
from fixedcode_study.config import compose as compose_config
from fixedcode_study.config import load_option, resolve_input_references
from fixedcode_study.errors import ConfigError
from fixedcode_study.inputs import (
    CodeMap,
    LearnedLowRank,
    SpellingCode,
    build_input,
    input_trainable_split,
)
from fixedcode_study.inputs.spelling import ngram_positions, spelling_code_bits
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.vocabulary import resolve_vocabulary

TINY_V, TINY_D = 4096, 128  # cpu_tiny


def conf_input(name: str, vocab_size: int = TINY_V) -> dict:
    return with_vocabulary(resolve_input_references(load_option("input", name, field="input")), vocab_size)


# -- counts: token-specific and shared, by formula ---------------------------------------------------
@pytest.mark.parametrize("name,token_specific,shared", [
    ("binary16_linear", 0, 16 * 128),                        # K d
    ("binary16_mlp", 0, 16 * 64 + 64 + 64 * 128),            # K h + h + h d
    ("binary16_mlp_wide", 0, 16 * 256 + 256 + 256 * 128),
    ("spelling_mlp", 0, 60 * 64 + 64 + 64 * 128),            # K = 48 n-gram bits + 12 ID bits
    ("learned_lowrank4", 4096 * 4, 4 * 128),                 # V r + r d
    ("learned_lowrank", 4096 * 16, 16 * 128),
    ("learned_lowdim", 4096 * 16, 0),
    ("learned", 4096 * 128, 0),
    ("binary16", 0, 0),
    ("spelling", 0, 0),
])
def test_trainable_input_parameters_follow_the_formula_of_their_type(name, token_specific, shared):
    cfg = conf_input(name)
    assert input_trainable_split(cfg, TINY_V, TINY_D) == {"token_specific": token_specific, "shared": shared}
    model = build_model({"vocab_size": TINY_V, "n_layer": 1, "n_head": 4, "d_model": TINY_D, "d_ff": 64,
                         "max_seq_len": 32}, cfg, seed=1)
    groups = parameter_groups(model)
    assert groups["input_trainable"] == token_specific + shared
    assert (groups["input_token_specific_trainable"], groups["input_shared_trainable"]) == (token_specific, shared)


# -- the spelling code -----------------------------------------------------------------------------
def test_spelling_bits_are_the_hashed_ngrams_and_collisions_get_the_id_bits():
    vocab = ["ab", "ab", "aaa", "aaaa", "ba", "xyz", ""]  # planted: a duplicate, one n-gram set twice
    bits, facts = spelling_code_bits(vocab, spelling_bits=16, max_ngram=3, hashes=2, hash_seed=0, lowercase=False)
    assert bits.shape == (7, 16 + 3)
    for i, token in enumerate(vocab):  # the first 16 bits: exactly the positions the token's n-grams hash to
        assert set(np.nonzero(bits[i, :16])[0]) == ngram_positions(token, 16, 3, 2, 0)
    # "ab"/"ab" and "aaa"/"aaaa" ({a, aa, aaa} both) collide; the rest keep a zero ID field
    assert facts == {"collided_tokens": 4, "collision_groups": 2, "largest_collision_group": 2}
    for i in (0, 1, 2, 3):
        assert list(bits[i, 16:]) == [(i >> j) & 1 for j in range(3)]
    for i in (4, 5, 6):
        assert not bits[i, 16:].any()
    assert len({row.tobytes() for row in bits}) == 7  # injective


def test_spelling_code_is_injective_on_planted_collisions_and_checks_it():
    vocab = ["the"] * 40 + synthetic_vocabulary(472)  # 40 identical spellings (the ID bits must separate them)
    code = SpellingCode(512, 64, vocabulary=vocab, spelling_bits=48)
    props = code.properties()
    assert props["injective"] is True and props["collided_tokens"] >= 40 and props["code_width"] == 48 + 9
    assert len({tuple(row) for row in code.scaled_code(torch.arange(512)).tolist()}) == 512


def test_spelling_code_is_injective_on_the_built_in_vocabulary():
    """The real tokenizer of the built-in data (the byte-level BPE at cpu_tiny's V), resolved as a job does."""
    cfg = compose_config(["model=cpu_tiny", "input=spelling"])
    spec = JobSpec.from_cfg(cfg)
    vocabulary = spec.model.input["vocabulary"]
    assert len(vocabulary) == TINY_V and len(set(vocabulary)) > TINY_V - 10  # the tokenizer's own strings
    code = build_input(spec.model.input, TINY_V, TINY_D)
    assert code.check_injective() and code.properties()["injective"] is True
    assert code.properties()["vocabulary_sha256"] == SpellingCode(TINY_V, TINY_D, vocabulary=vocabulary).vocabulary_sha256


def test_vocabulary_data_is_resolved_inside_a_code_map_and_refused_without_a_job():
    raw = resolve_input_references(load_option("input", "spelling_mlp", field="input"))
    assert raw["code"]["vocabulary"] == "data"
    with pytest.raises(ConfigError) as err:
        build_input(raw, TINY_V, TINY_D)
    assert err.value.field == "input.vocabulary"
    data = compose_config(["model=cpu_tiny"]).data
    from omegaconf import OmegaConf
    resolved = resolve_vocabulary(raw, OmegaConf.to_container(data, resolve=True), TINY_V)
    assert isinstance(resolved["code"]["vocabulary"], list) and len(resolved["code"]["vocabulary"]) == TINY_V
    assert raw["code"]["vocabulary"] == "data"  # the input settings given are not changed


def test_a_spelling_vocabulary_of_the_wrong_length_is_one_line_naming_the_field():
    with pytest.raises(ConfigError) as err:
        SpellingCode(512, 64, vocabulary=["a", "b"])
    assert err.value.field == "input.vocabulary" and "\n" not in str(err.value)


# -- fixed parts stay fixed, trainable parts train, through the real optimizer ------------------------
@pytest.mark.parametrize("name", ["binary16_linear", "binary16_mlp", "spelling_mlp", "learned_lowrank4"])
def test_a_code_never_changes_in_training_while_its_map_trains(name):
    cfg = conf_input(name, MICRO["vocab_size"])
    model = build_model(MICRO, cfg, seed=1)
    V = MICRO["vocab_size"]
    buffers = {k: v.clone() for k, v in model.input.state_dict().items() if not k.startswith(("proj", "fc_in", "table"))}
    code_before = model.input.code.scaled_code(torch.arange(V)).clone() if isinstance(model.input, CodeMap) else None
    trainable_before = {k: p.detach().clone() for k, p in model.input.named_parameters()}
    opt = training_optimizer(model)
    for _ in range(4):
        x = torch.randint(0, V, (4, 17))
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    for key, before in buffers.items():
        assert torch.equal(model.input.state_dict()[key], before), (name, key)
    if code_before is not None:
        assert torch.equal(model.input.code.scaled_code(torch.arange(V)), code_before)
        assert not any(p.requires_grad for p in model.input.code.parameters())
    for key, before in trainable_before.items():  # the map (and a low-rank table) did train
        assert not torch.equal(dict(model.input.named_parameters())[key], before), (name, key)


# -- init: the stated RMS, exactly, and common random numbers for body and head ---------------------
@pytest.mark.parametrize("name,target", [("binary16_linear", "code"), ("binary16_mlp", "code"),
                                         ("learned_lowrank", "table")])
def test_the_input_rms_at_init_is_the_stated_target_exactly(name, target):
    layer = build_input(conf_input(name), TINY_V, TINY_D, init_std=0.02)
    layer.reset_parameters(torch.Generator().manual_seed(3))
    with torch.no_grad():
        rms = layer(torch.arange(TINY_V)).double().pow(2).mean().sqrt().item()
    expected = build_input(conf_input("binary16"), TINY_V, TINY_D).input_rms() if target == "code" else 0.02
    assert rms == pytest.approx(expected, rel=1e-5)


def test_init_rms_table_matches_the_learned_tables_std():
    cfg = {**conf_input("binary16_linear"), "init_rms": "table"}
    layer = build_input(cfg, TINY_V, TINY_D, init_std=0.02)
    with torch.no_grad():
        assert layer(torch.arange(TINY_V)).double().pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=1e-5)


@pytest.mark.parametrize("settings,field", [
    ({"map": "conv"}, "input.map"),
    ({"map": "mlp", "hidden": 0}, "input.hidden"),
    ({"map": "linear", "hidden": 8}, "input.hidden"),
    ({"map": "mlp", "hidden": 8, "activation": "tanh"}, "input.activation"),
    ({"init_rms": "unit"}, "input.init_rms"),
    ({"code": {"type": "learned"}}, "input.code.type"),
])
def test_bad_code_map_settings_are_one_line_naming_the_field(settings, field):
    cfg = {**conf_input("binary16_linear"), **settings}
    with pytest.raises(ConfigError) as err:
        build_input(cfg, TINY_V, TINY_D)
    assert err.value.field == field and "\n" not in str(err.value)


def test_bad_rank_is_one_line_naming_the_field():
    with pytest.raises(ConfigError) as err:
        LearnedLowRank(TINY_V, TINY_D, rank=0)
    assert err.value.field == "input.rank"
