"""Model presets (conf/model): sources, dimensions, parameter counts, and the ladder table."""

from __future__ import annotations

import re

import pytest
import yaml

from fixedcode_study.config import CONFIG_DIR
from fixedcode_study.config import available
from fixedcode_study.config import compose as compose_config
from fixedcode_study.cli.describe import described
from fixedcode_study.spec import JobSpec
from fixedcode_study.spec.description import LADDER_INPUTS, ladder_markdown
from fixedcode_study.spec.description import describe as describe_spec
from fixedcode_study.model import ModelConfig
from fixedcode_study.accounting import body_params


def describe(cfg):
    """The describe dict of a composed config, resolved as `fixedcode describe` resolves it."""
    return describe_spec(JobSpec.from_cfg(cfg))


LADDER = ["test_micro", "cpu_tiny", "cpu_30m", "smollm2_135m", "smollm2_360m", "paper_1p7b"]

# Dimensions as published in the HuggingFaceTB/SmolLM2-* config.json files (our presets untie the head).
SMOLLM2 = {
    "smollm2_135m": dict(n_layer=30, d_model=576, n_head=9, n_kv_head=3, d_ff=1536, rope_theta=100000.0, vocab_size=49152),
    "smollm2_360m": dict(n_layer=32, d_model=960, n_head=15, n_kv_head=5, d_ff=2560, rope_theta=100000.0, vocab_size=49152),
    "paper_1p7b": dict(n_layer=24, d_model=2048, n_head=32, n_kv_head=32, d_ff=8192, rope_theta=130000.0, vocab_size=49152),
}


def preset(name: str) -> dict:
    return yaml.safe_load(open(f"{CONFIG_DIR}/model/{name}.yaml"))


def test_ladder_presets_exist_with_name_and_source():
    assert set(LADDER) <= set(available("model"))
    for name in available("model"):
        p = preset(name)
        assert p["name"] == name and p.get("source"), name
        ModelConfig.from_mapping(p)  # valid architecture


@pytest.mark.parametrize("name", sorted(SMOLLM2))
def test_smollm2_dimensions_match_their_config_json(name):
    p = preset(name)
    for key, value in SMOLLM2[name].items():
        assert p[key] == value, (name, key)
    assert p["d_model"] // p["n_head"] == 64  # head_dim 64 in all three configs


def test_parameter_counts_match_published_numbers():
    # HF reports SmolLM2-135M (tied) as 134,515,008 parameters, 106,203,456 of them non-embedding.
    # Untied with a learned input it gains one more V x d table; a fixed code drops the input table.
    learned = describe(compose_config(["model=smollm2_135m", "input=learned"]))["params"]
    fixed = describe(compose_config(["model=smollm2_135m", "input=binary16"]))["params"]
    assert learned["body"] == 106_203_456
    assert fixed["trainable"] == 134_515_008
    assert learned["trainable"] == 134_515_008 + 49152 * 576
    # The paper's numbers (conf/model/paper_1p7b.yaml)
    assert describe(compose_config(["model=paper_1p7b", "input=learned"]))["params"]["trainable"] == 1_812_039_680
    assert describe(compose_config(["model=paper_1p7b", "input=gf2"]))["params"]["trainable"] == 1_711_376_384


def test_cpu_30m_is_the_coordinated_benchmark_size():
    p = preset("cpu_30m")
    assert (p["n_layer"], p["d_model"], p["n_head"], p["d_ff"], p["vocab_size"], p["max_seq_len"]) == (
        8, 512, 8, 1376, 8192, 256)
    trainable = describe(compose_config(["model=cpu_30m", "input=learned"]))["params"]["trainable"]
    assert 25e6 < trainable < 40e6


@pytest.mark.parametrize("name", LADDER)
def test_analytic_body_count_matches_the_built_model(name):
    d = describe(compose_config([f"model={name}", "input=binary16"]))
    assert body_params(ModelConfig(**d["architecture"])) == d["params"]["body"]


def test_vocab_is_configurable_on_smollm2_presets():
    d = describe(compose_config(["model=smollm2_360m", "input=learned", "model.vocab_size=32768"]))
    assert d["params"]["input_trainable"] == d["params"]["head"] == 32768 * 960


@pytest.mark.slow
def test_ladder_markdown_rows_agree_with_describe():
    table = ladder_markdown({name: {role: described([f"model={name}", f"input={input_name}"])
                                    for role, input_name in LADDER_INPUTS.items()} for name in available("model")})
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| preset")]
    names = [r.split("|")[1].strip() for r in rows]
    assert set(names) == set(available("model"))
    learned_counts = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name, learned, fixed = cells[0], int(cells[6].replace(",", "")), int(cells[7].replace(",", ""))
        assert learned == describe(compose_config([f"model={name}", "input=learned"]))["params"]["trainable"]
        assert fixed == describe(compose_config([f"model={name}", "input=gf2"]))["params"]["trainable"]
        matched = int(re.search(r"→ ([\d,]+)", cells[9]).group(1).replace(",", ""))
        assert abs(matched / learned - 1) <= 0.01
        learned_counts.append(learned)
    assert learned_counts == sorted(learned_counts)  # smallest first
