"""Exported folders as plain transformers users meet them (issue 27, points 1 and 7).

Every check is what a user types: AutoTokenizer / AutoModel / AutoModelForCausalLM on the folder,
the model card's own snippet, `model(ids)`, `generate`, `get_input_embeddings().weight`. The code
under test is only the export; references are the workbench checkpoint (its tokenizer, its input)
and transformers' own plain-Llama export of the learned model. Loads that could stop at
transformers' "run the custom code? [y/N]" question run in a subprocess with stdin closed and a
timeout, as a script or CI job would.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

pytest.importorskip("transformers")

from helpers.eval import trained_checkpoint  # noqa: E402
from transformers import AutoModel, AutoModelForCausalLM  # noqa: E402

from fixedcode_study.hub.export import export_checkpoint  # noqa: E402
from fixedcode_study.record.checkpoint import load_checkpoint  # noqa: E402

TEXT = "KING HENRY:\nNow, lords, to France!"
PROMPT_WORDS = "custom code"  # in transformers' trust_remote_code question and its error
WRONG_CONFIG = "to instantiate a model of type"  # transformers' warning when it falls back to a bare config


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{name: (checkpoint dir, export folder)} for the learned control and two fixed codes."""
    root = tmp_path_factory.mktemp("user-exports")
    return {name: (trained_checkpoint(name)[0], export_checkpoint(trained_checkpoint(name)[0], root / name).path)
            for name in ("learned", "binary16", "gf2")}


def run_as_a_script(code: str) -> subprocess.CompletedProcess:
    """`python -c code`, offline, stdin closed (no terminal to answer a question), 120 s at most."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "warning"}
    return subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, env=env)


def workbench_ids(ckpt_dir) -> list[int]:
    return load_checkpoint(ckpt_dir).tokenizer.encode(TEXT).ids


def test_the_tokenizer_of_a_fixed_code_export_loads_with_no_remote_code_and_no_question(exports):
    folders = {name: str(exports[name][1]) for name in ("binary16", "gf2")}
    done = run_as_a_script(
        "import json\nfrom transformers import AutoTokenizer\n"
        f"print(json.dumps({{name: AutoTokenizer.from_pretrained(f)({TEXT!r})['input_ids'] "
        f"for name, f in {folders!r}.items()}}))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert PROMPT_WORDS not in done.stderr and WRONG_CONFIG not in done.stderr, done.stderr[-2000:]
    encoded = json.loads(done.stdout.strip().splitlines()[-1])
    for name in folders:
        assert encoded[name] == workbench_ids(exports[name][0]), name


@pytest.mark.slow
def test_the_model_cards_snippet_runs_as_written(exports):
    ckpt_dir, folder = exports["gf2"]
    card = (folder / "README.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert "AutoTokenizer.from_pretrained(FOLDER)" in snippet  # the tokenizer line as users copy it
    code = snippet.replace("FOLDER", repr(str(folder)))
    done = run_as_a_script(code + f"print(type(model).__name__, tokenizer({TEXT!r})['input_ids'])\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert PROMPT_WORDS not in done.stderr and WRONG_CONFIG not in done.stderr, done.stderr[-2000:]
    name, ids = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert name == "FixedCodeLlamaForCausalLM" and json.loads(ids) == workbench_ids(ckpt_dir)


@pytest.mark.parametrize("name", ["binary16", "gf2"])
def test_without_trust_remote_code_the_model_is_refused_not_loaded_with_a_random_input_table(exports, name):
    _, folder = exports[name]
    for auto in (AutoModelForCausalLM, AutoModel):
        with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):  # the (V, 0) placeholder's shape
            auto.from_pretrained(str(folder))


@pytest.mark.parametrize("name", ["learned", "binary16", "gf2"])
def test_out_of_vocabulary_ids_are_an_error_as_in_the_learned_export(exports, name):
    _, folder = exports[name]
    model = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=name != "learned").eval()
    V = model.config.vocab_size
    with torch.no_grad():
        model(torch.tensor([[0, V - 1]]))  # both ends of the vocabulary are fine
        for bad in (V, V + 1000, -1):
            with pytest.raises(IndexError) as err:
                model(torch.tensor([[1, bad]]))
            if name != "learned":  # nn.Embedding says "index out of range in self"; ours names the id
                assert str(bad) in str(err.value) and str(V) in str(err.value)


@pytest.mark.parametrize("name", ["binary16", "gf2"])
def test_automodel_loads_the_base_model_with_the_causal_lms_hidden_states(exports, name):
    _, folder = exports[name]
    causal = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True).eval()
    base = AutoModel.from_pretrained(str(folder), trust_remote_code=True).eval()
    assert type(base).__name__ == "FixedCodeLlamaModel" == type(causal.model).__name__
    ids = torch.randint(0, causal.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        hidden = base(ids).last_hidden_state
        torch.testing.assert_close(hidden, causal.model(ids).last_hidden_state, atol=0, rtol=0)
        torch.testing.assert_close(causal.lm_head(hidden), causal(ids).logits, atol=0, rtol=0)


class TransformersLog(logging.Handler):
    """What transformers' own logger prints (it does not propagate to the root logger)."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def generate_and_listen(model, prompt: torch.Tensor, new: int) -> tuple[torch.Tensor, list[str]]:
    from transformers.utils import logging as hf_logging

    hf_logging.warning_once.cache_clear()  # transformers says some things once per process
    log = TransformersLog()
    logging.getLogger("transformers").addHandler(log)
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new, do_sample=False)
    finally:
        logging.getLogger("transformers").removeHandler(log)
    return out, [str(w.message) for w in caught] + log.lines


@pytest.mark.parametrize("name", ["learned", "gf2"])
def test_generate_with_max_new_tokens_does_not_warn_and_past_the_context_says_so_as_for_llama(exports, name):
    _, folder = exports[name]
    model = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=name != "learned").eval()
    assert "max_length" not in json.loads((folder / "generation_config.json").read_text())
    prompt = torch.tensor([[0, 17, 42]])
    out, said = generate_and_listen(model, prompt, 5)
    assert out.shape[1] == 3 + 5 and not [s for s in said if "max_length" in s or "maximum length" in s], said
    context = model.config.max_position_embeddings
    out, said = generate_and_listen(model, prompt, context)  # runs past the trained context
    assert out.shape[1] == 3 + context  # transformers does not stop a Llama there...
    assert any(f"maximum length ({context})" in s for s in said), said  # ...it says so, for both kinds


@pytest.mark.parametrize("name", ["binary16", "gf2"])
def test_input_embeddings_weight_is_the_fixed_code_the_model_feeds(exports, name):
    ckpt_dir, folder = exports[name]
    model = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True).eval()
    V, d = model.config.vocab_size, model.config.hidden_size
    weight = model.get_input_embeddings().weight
    assert weight.shape == (V, d) and not weight.requires_grad
    assert not list(model.get_input_embeddings().parameters())  # still nothing trainable at the input
    ids = torch.arange(V)
    with torch.no_grad():
        assert torch.equal(weight[ids], model.get_input_embeddings()(ids[None])[0])  # what forward feeds
        assert torch.equal(weight, load_checkpoint(ckpt_dir).model.input(ids[None])[0])  # the workbench's code
    half = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True, dtype=torch.bfloat16)
    assert half.get_input_embeddings().weight.dtype == torch.bfloat16  # follows the weights, as nn.Embedding
