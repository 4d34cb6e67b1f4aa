"""The two evaluation paths agree on the paper's tasks where a continuation outgrows the context
(issue 27, point 2): the workbench adapter (evaluate checkpoint=...) and lm-eval's own HFLM on the
export (evaluate hf=...). test_micro's context is 64 tokens; PIQA solutions and ARC answers run
longer, so both paths must score a long continuation by one rule (spec.evaluation.CONTEXT_RULE),
which each record states. Plain HFLM stops at an assertion on the same requests."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="lm-eval's HFLM imports accelerate")

from helpers.eval import SHARED_EVAL, mirror_available, trained_checkpoint  # noqa: E402

from fixedcode_study.cli.evaluate import compose_eval_config  # noqa: E402
from fixedcode_study.evaluation.harness import evaluate_checkpoint, run_suite  # noqa: E402
from fixedcode_study.hub.export import export_checkpoint  # noqa: E402
from fixedcode_study.hub.external import evaluate_external  # noqa: E402
from fixedcode_study.spec.evaluation import CONTEXT_RULE  # noqa: E402

TASKS = ["piqa", "arc_easy"]


@pytest.mark.skipif(not mirror_available(*TASKS), reason="shared eval mirror absent")
def test_hf_export_and_adapter_agree_on_continuations_longer_than_the_context(tmp_path):
    ckpt, _ = trained_checkpoint("gf2")
    folder = export_checkpoint(ckpt, tmp_path / "export").path
    cfg = compose_eval_config(["eval=paper", f"eval.tasks=[{','.join(TASKS)}]", "eval.limit=30",
                               "eval.bootstrap_iters=0", f"eval.data_dir={SHARED_EVAL}"])
    ours = evaluate_checkpoint(ckpt, cfg, write=False)
    theirs = evaluate_external(str(folder), cfg, tmp_path / "study", write=False)
    assert ours["context"] == theirs["context"] == {"max_length": 64, "rule": CONTEXT_RULE}
    compared = 0
    for task in TASKS:
        for metric, value in ours["tasks"][task].items():
            if value is not None and not metric.endswith("_stderr"):
                assert theirs["tasks"][task][metric] == pytest.approx(value, rel=1e-4, abs=1e-4), (task, metric)
                compared += 1
    assert compared >= 4

    # lm-eval's plain HFLM on the same export and requests: the assertion the clipped class avoids.
    from lm_eval.models.huggingface import HFLM

    plain = HFLM(pretrained=str(folder), tokenizer=str(folder), trust_remote_code=True, batch_size=16, device="cpu")
    with pytest.raises(AssertionError):
        run_suite(plain, cfg.with_paths(data_dir=str(SHARED_EVAL)))
