"""The built-in last-word choice task (issue 27, point 9): passages keep the text as the model
trained on it, and the 4-way choice separates a trained model from an untrained one where exact
last-word recall sits at the floor."""

from __future__ import annotations

import json

from helpers.eval import trained_checkpoint, untrained_checkpoint

from fixedcode_study.cli.evaluate import compose_eval_config
from fixedcode_study.evaluation.harness import evaluate_checkpoint
from fixedcode_study.evaluation.tasks.builtin import HELDOUT_CHOICE, choice_items, derive_files, lastword_passages

TEXT = ("THESEUS\nNow, fair Hippolyta, our nuptial hour\nDraws on apace; four happy days bring in\n"
        "Another moon. But O, methinks, how slow\nThis old moon wanes! She lingers my desires.\n")


def test_passages_keep_the_documents_line_breaks_and_end_after_a_space():
    (first, *_) = lastword_passages([TEXT], 17, 10)
    assert first == "THESEUS\nNow, fair Hippolyta, our nuptial hour\nDraws on apace; four happy days bring in\nAnother moon"
    assert first.split(" ")[-1] == "moon"  # what lambada's text.split(' ') takes as the target


def test_choice_items_put_the_target_among_three_words_of_its_document_deterministically():
    items = list(choice_items([TEXT], 12, 10))
    assert items == list(choice_items([TEXT], 12, 10))  # seeded by the passage index
    passages = list(lastword_passages([TEXT], 12, 10))
    words = {w.strip(".,;!?").lower() for w in TEXT.split()}
    for item, passage in zip(items, passages):
        assert item["context"] + " " + item["choices"][item["gold"]] == passage
        assert len(item["choices"]) == 4 and len({c.lower() for c in item["choices"]}) == 4
        assert all(c.lower() in words for c in item["choices"])


def test_a_trained_model_scores_otherwise_than_an_untrained_one(tmp_path):
    ckpt, prepared = trained_checkpoint("learned")
    files = derive_files(prepared, {"lastword_words": 40, "lastword_max_passages": 1000})
    rows = [json.loads(line) for line in files[HELDOUT_CHOICE].read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 100 and 0.15 < sum(r["gold"] == 0 for r in rows) / len(rows) < 0.35
    cfg = compose_eval_config(["eval=builtin", f"eval.tasks=[{HELDOUT_CHOICE}]", "eval.bootstrap_iters=0"])
    trained = evaluate_checkpoint(ckpt, cfg, write=False, prepared_root=prepared)["tasks"][HELDOUT_CHOICE]
    untrained = evaluate_checkpoint(untrained_checkpoint("learned"), cfg, write=False,
                                    prepared_root=prepared)["tasks"][HELDOUT_CHOICE]
    # test_micro after 8k tokens: 0.307 against 0.271 (deterministic: same seeds, same passages); a
    # cpu_tiny after 2^19 tokens scores 0.448 (learned) and 0.428 (binary16), where exact last-word
    # recall is 0.0099 for both
    assert trained["acc"] > untrained["acc"]
    assert abs(untrained["acc"] - 0.25) < 0.08  # an untrained model is at chance
