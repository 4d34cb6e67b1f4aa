"""The lm-eval adapter (fixedcode_study.evaluation.lm) against independent computations.

Reference values come from direct forward passes of the Decoder (written out here, not through
the adapter) and from lm-eval's own HFLM on the equivalent transformers Llama.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F
from helpers.eval import trained_checkpoint, untrained_checkpoint
from lm_eval.api.instance import Instance

from fixedcode_study.config import available
from fixedcode_study.record.checkpoint import load_checkpoint
from fixedcode_study.errors import ConfigError
from fixedcode_study.evaluation.lm import FixedCodeLM

CONTEXT = 64  # test_micro max_seq_len

# Covers: plain pair, trailing context whitespace (moves to the continuation), empty context
# (end-of-text as context), multi-line text, a shared context with one-token choices (shared rows),
# and an input longer than the context (cut from the left).
REQUESTS = [
    ("To be, or not to be", " that is the question"),
    ("KING HENRY. My lord, ", "the French are come."),
    ("", "Enter HAMLET"),
    ("First Citizen:\nBefore we proceed any further, hear me speak.\n", "All:\nSpeak, speak."),
    ("Answer: the", " a"), ("Answer: the", " b"), ("Answer: the", " king"),
    (" ".join(["thou art a villain"] * 30), " and a knave"),
]


def instances(pairs, kind="loglikelihood"):
    return [Instance(kind, {}, pair, i) for i, pair in enumerate(pairs)]


@pytest.fixture(scope="module")
def learned():
    return trained_checkpoint("learned")[0]


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def direct_loglikelihood(model, tok, context, continuation, eot=0):
    """The harness's definition computed by hand: split, one full forward, sum of log-probs."""
    if context:
        n = len(context) - len(context.rstrip())
        context, continuation = (context[:-n], context[-n:] + continuation) if n else (context, continuation)
        whole, ctx = encode(tok, context + continuation), encode(tok, context)
        ctx_ids, cont_ids = ctx, whole[len(ctx):]
    else:
        ctx_ids, cont_ids = [eot], encode(tok, continuation)
    inp = (ctx_ids + cont_ids)[-(CONTEXT + 1):][:-1]
    with torch.no_grad():
        logprobs = F.log_softmax(model(torch.tensor([inp])).float(), dim=-1)[0, -len(cont_ids):]  # (n, V)
    target = torch.tensor(cont_ids)
    return float(logprobs.gather(1, target[:, None]).sum()), bool((logprobs.argmax(-1) == target).all())


@pytest.mark.parametrize("input_name", ["learned", "gf2"])
def test_loglikelihood_matches_a_direct_forward_pass(input_name, learned):
    ckpt = learned if input_name == "learned" else untrained_checkpoint(input_name)
    lm = FixedCodeLM(checkpoint=ckpt, batch_size=3, device="cpu")
    model = load_checkpoint(ckpt).model
    ours = lm.loglikelihood(instances(REQUESTS), disable_tqdm=True)
    for (ctx, cont), (ll, greedy) in zip(REQUESTS, ours):
        ref_ll, ref_greedy = direct_loglikelihood(model, lm.tokenizer, ctx, cont)
        assert ll == pytest.approx(ref_ll, abs=1e-5, rel=1e-6), (ctx, cont)
        assert greedy == ref_greedy
    assert len({ll for ll, _ in ours[4:7]}) == 3  # shared-row choices still get their own scores


def reference_greedy(model, ids, n, eot=0):
    new = []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([(ids + new)[-CONTEXT:]]))[0, -1].argmax())
            if nxt == eot:
                break
            new.append(nxt)
    return new


def test_is_greedy_is_true_exactly_for_the_models_own_greedy_continuation(learned):
    lm = FixedCodeLM(checkpoint=learned, batch_size=4)
    model = load_checkpoint(learned).model
    ctx = encode(lm.tokenizer, "ROMEO. But soft, what light")
    cont = reference_greedy(model, ctx, 3)
    assert len(cont) == 3
    other = cont[:-1] + [(cont[-1] + 1) % 512]
    (ll, greedy), (ll_other, not_greedy) = lm._loglikelihood_tokens(
        [(("a", "b"), ctx, cont), (("a", "c"), ctx, other)], disable_tqdm=True)
    assert greedy is True and not_greedy is False and ll > ll_other


def test_results_do_not_depend_on_batch_size(learned):
    pairs = REQUESTS * 3
    runs = [FixedCodeLM(checkpoint=learned, batch_size=bs).loglikelihood(instances(pairs), disable_tqdm=True)
            for bs in (1, 5, 64)]
    for other in runs[1:]:
        torch.testing.assert_close(torch.tensor([ll for ll, _ in other]), torch.tensor([ll for ll, _ in runs[0]]),
                                   atol=1e-5, rtol=1e-6)
        assert [g for _, g in other] == [g for _, g in runs[0]]


def test_rolling_loglikelihood_is_a_sum_over_disjoint_context_windows(learned):
    lm = FixedCodeLM(checkpoint=learned, batch_size=4)
    model = load_checkpoint(learned).model
    text = "Now is the winter of our discontent made glorious summer by this sun of York. " * 12
    ids = encode(lm.tokenizer, text)
    assert len(ids) > 3 * CONTEXT
    stream = [lm.eot_token_id] + ids  # the first token is predicted from end-of-text
    expected = 0.0
    with torch.no_grad():
        for start in range(0, len(ids), CONTEXT):
            targets = ids[start:start + CONTEXT]
            inp = stream[max(0, start + len(targets) - CONTEXT):start + len(targets)]  # window of <= CONTEXT tokens
            logprobs = F.log_softmax(model(torch.tensor([inp])).float(), dim=-1)[0, -len(targets):]
            expected += float(logprobs.gather(1, torch.tensor(targets)[:, None]).sum())
    result = lm.loglikelihood_rolling(instances([(text,), ("short text",)], "loglikelihood_rolling"), disable_tqdm=True)
    assert all(type(v) is float for v in result)
    assert result[0] == pytest.approx(expected, abs=1e-4, rel=1e-6)


def test_generate_until_is_greedy_and_honours_stop_strings_and_max_gen_toks(learned):
    lm = FixedCodeLM(checkpoint=learned, batch_size=4)
    model = load_checkpoint(learned).model
    prompt, other_prompt = "HAMLET. To be, or not", "Other prompt of another length"
    greedy = lm.tokenizer.decode(reference_greedy(model, encode(lm.tokenizer, prompt), 24))
    assert len(greedy) >= 4, "the reference continuation is too short; pick another prompt"
    stop = greedy[len(greedy) // 2:len(greedy) // 2 + 2]
    out = lm.generate_until([
        Instance("generate_until", {}, (prompt, {"until": [stop], "max_gen_toks": 24}), 0),
        Instance("generate_until", {}, (prompt, {"until": ["@@never@@"], "max_gen_toks": 5}), 1),
        Instance("generate_until", {}, (other_prompt, {"until": "@@never@@", "max_gen_toks": 3}), 2),
    ], disable_tqdm=True)
    assert out[0] == greedy[:greedy.index(stop)]
    assert out[1] == lm.tokenizer.decode(reference_greedy(model, encode(lm.tokenizer, prompt), 5))
    assert out[2] == lm.tokenizer.decode(reference_greedy(model, encode(lm.tokenizer, other_prompt), 3))


def test_matches_lm_evals_hflm_on_the_equivalent_llama(learned):
    pytest.importorskip("accelerate", reason="lm-eval's HFLM imports accelerate")
    from lm_eval.models.huggingface import HFLM
    from transformers import PreTrainedTokenizerFast

    from fixedcode_study.systems.hf import to_hf_llama

    lm = FixedCodeLM(checkpoint=learned, batch_size=4)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=lm.tokenizer, eos_token="<|endoftext|>")
    hflm = HFLM(pretrained=to_hf_llama(lm.model), tokenizer=hf_tok, batch_size=4, device="cpu")
    assert hflm.max_length == lm.max_length and hflm.prefix_token_id == lm.prefix_token_id

    reqs = instances(REQUESTS)
    for (ours, greedy), (theirs, their_greedy) in zip(lm.loglikelihood(reqs, disable_tqdm=True),
                                                      hflm.loglikelihood(reqs, disable_tqdm=True)):
        assert ours == pytest.approx(theirs, abs=1e-4)
        assert greedy == their_greedy
    rolling = instances([("The quality of mercy is not strain'd. " * 15,), ("Exeunt.",)], "loglikelihood_rolling")
    for ours, theirs in zip(lm.loglikelihood_rolling(rolling, disable_tqdm=True),
                            hflm.loglikelihood_rolling(rolling, disable_tqdm=True)):
        assert ours == pytest.approx(theirs, abs=1e-4)


def test_registered_with_lm_eval_and_built_from_an_arg_string(learned):
    from lm_eval.api.registry import get_model

    cls = get_model("fixedcode")
    assert cls is FixedCodeLM
    lm = cls.create_from_arg_string(f"checkpoint={learned},dtype=float32",
                                    {"batch_size": "7", "max_batch_size": None, "device": "cpu"})
    assert lm.batch_size == 7 and lm.device.type == "cpu" and lm.max_length == CONTEXT
    assert get_model("hf") is not None  # our registration does not hide lm-eval's own models


def test_checkpoint_whose_config_does_not_match_its_weights_fails_clearly(learned, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(learned, bad)
    config = json.loads((bad / "config.json").read_text())
    built = config["spec"]["model"]["config"]  # the architecture the load builds: the stored spec's
    built["n_layer"] = 3
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"^checkpoint: config.json does not match model.safetensors \(missing"):
        FixedCodeLM(checkpoint=bad)
    built["n_layer"], built["d_ff"] = 2, 96
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"shape of .*: weights .* vs config"):
        FixedCodeLM(checkpoint=bad)
    with pytest.raises(ConfigError, match=r"^checkpoint: .*config.json does not exist"):
        FixedCodeLM(checkpoint=tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"^batch_size:"):
        FixedCodeLM(checkpoint=learned, batch_size="many")


@pytest.mark.parametrize("input_name", available("input"))
def test_every_input_type_evaluates_in_every_dtype_through_the_training_forward(input_name):
    """eval.dtype=bfloat16/float16 once crashed for the fixed codes: the adapter had its own copy of
    the forward pass. It now calls Decoder.features, the training forward, so every input type
    scores in every dtype, close to its fp32 numbers."""
    ckpt = untrained_checkpoint(input_name)
    scores = {dtype: [ll for ll, _ in FixedCodeLM(checkpoint=ckpt, batch_size=4, device="cpu", dtype=dtype)
                      .loglikelihood(instances(REQUESTS[:4]), disable_tqdm=True)]
              for dtype in ("float32", "bfloat16", "float16")}
    for dtype in ("bfloat16", "float16"):
        assert all(math.isfinite(x) for x in scores[dtype]), (dtype, scores[dtype])
        # a sum of ~10 token log-probs of a 512-way untrained model: reduced precision moves it a little
        assert scores[dtype] == pytest.approx(scores["float32"], rel=0.02, abs=0.1), dtype
