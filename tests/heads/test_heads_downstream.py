"""Everything after training works for every output head: lm-eval through our adapter (log-likelihoods
and greedy generation), the probes' hidden states, and resume after kill -9 for the bit chain (the one
head whose training step does not go through logits)."""

from __future__ import annotations

import signal

import pytest
import torch
import torch.nn.functional as F
from helpers.cli import run_cli
from helpers.distributed import TINY, metric_rows, only_job, results, start, stop, wait_for
from helpers.eval import trained_checkpoint, untrained_checkpoint
from lm_eval.api.instance import Instance

from fixedcode_study.build import build_model
from fixedcode_study.config import available
from fixedcode_study.evaluation.lm import FixedCodeLM
from fixedcode_study.record.checkpoint import load_checkpoint

PAIRS = [("To be, or not to be", " that is the question"), ("", "Enter HAMLET"), ("Answer: the", " king")]
HEADS = [(("learned" if name == "tied" else "binary16"), name) for name in available("output")]


def _direct(model, tok, context, continuation):
    ctx = tok.encode(context, add_special_tokens=False).ids if context else [0]
    cont = tok.encode(continuation, add_special_tokens=False).ids
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ctx + cont])[:, :-1]).float(), -1)[0, -len(cont):]
    return float(logp.gather(1, torch.tensor(cont)[:, None]).sum())


@pytest.mark.parametrize("input_name,output", HEADS)
def test_the_adapter_scores_and_generates_with_every_head(input_name, output):
    ckpt = untrained_checkpoint(input_name, output_name=output, randomised=True)
    lm = FixedCodeLM(checkpoint=ckpt, batch_size=2, device="cpu")
    model = load_checkpoint(ckpt).model
    scores = lm.loglikelihood([Instance("loglikelihood", {}, p, i) for i, p in enumerate(PAIRS)], disable_tqdm=True)
    for (ctx, cont), (ll, _) in zip(PAIRS, scores):
        assert ll == pytest.approx(_direct(model, lm.tokenizer, ctx, cont), abs=1e-4, rel=1e-5), (output, ctx)
    text = lm.generate_until([Instance("generate_until", {}, ("ROMEO.", {"until": ["\n\n"], "max_gen_toks": 4}), 0)],
                             disable_tqdm=True)
    assert len(text) == 1 and isinstance(text[0], str)


def test_probes_rebuild_a_table_free_jobs_init_and_read_its_final_model():
    """The probe's init baseline is the job's own step-0 model, head included (its config's output),
    and its final model is the checkpoint's: both bit-chain heads, features as training computes them."""
    from fixedcode_study.heads import BitChainHead
    from fixedcode_study.probing.states import final_model, find_subjects, init_model

    ckpt, _ = trained_checkpoint("binary16", "bitchain")
    (subject,) = find_subjects(ckpt.parent.parent)  # the job directory
    init, final = init_model(subject).model, final_model(subject).model
    assert isinstance(init.head, BitChainHead) and isinstance(final.head, BitChainHead)
    fresh = build_model(subject.config["model"], subject.config["input"], seed=subject.seed,
                        output_cfg=subject.config["output"])
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in init.state_dict().items())
    assert not torch.equal(init.head.pair_weight, final.head.pair_weight)  # trained


@pytest.mark.slow  # a subprocess killed mid-training and the reference run: ~1 min on 2 cores
def test_a_bitchain_job_killed_with_sigkill_resumes_bit_for_bit(tmp_path):
    args = [*TINY, "input=binary16", "output=bitchain", "checkpoint.every_steps=4", "checkpoint.keep_every_steps=12"]
    reference = tmp_path / "reference"
    done = run_cli([*args, f"out_root={reference}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = tmp_path / "killed"
    proc = start([*args, f"out_root={killed}"], tmp_path, tmp_path / "attempt1.log")
    wait_for("**/checkpoints/step-0000012.ckpt", killed, proc)
    assert stop(proc, signal.SIGKILL) == -signal.SIGKILL
    assert run_cli([*args, f"out_root={killed}"], cwd=tmp_path).returncode == 0
    job, ref = only_job(killed), only_job(reference)
    assert results(job)["attempts"] == 2 and results(job)["final"] == results(ref)["final"]
    assert metric_rows(job) == metric_rows(ref)
