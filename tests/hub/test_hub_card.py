"""The exported folder as a Hub reader meets it (issue 42, points 4 and 7): downstream scores carry what
they rest on, and a smoke test (eval.limit) is said to be one and never declared as the model's
result in the Hub's model-index metadata.

The job is trained and evaluated by the real job path (run_job with eval=builtin), then exported.
"""

from __future__ import annotations

import re

import pytest
import yaml

pytest.importorskip("transformers")

from helpers import SMALL_VAL  # noqa: E402

from fixedcode_study.config import compose  # noqa: E402
from fixedcode_study.hub.export import export_checkpoint  # noqa: E402
from fixedcode_study.spec import JobSpec  # noqa: E402
from fixedcode_study.training.job import run_job  # noqa: E402


def front_matter(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, flags=re.S)
    assert match, card[:300]
    return yaml.safe_load(match.group(1))


@pytest.fixture(scope="module")
def smoke_card(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    cfg = compose(["model=test_micro", "logger=csv", "input=binary16", "train.tokens=4096", "train.batch_size=8",
                   "train.val_points=1", SMALL_VAL, "eval=builtin", "eval.limit=3", "eval.bootstrap_iters=10",
                   f"out_root={root / 'out'}"])
    job_dir = root / "out" / "job"
    record = run_job(JobSpec.from_cfg(cfg), job_dir).record
    assert record["status"] == "completed", record.get("error")
    done = export_checkpoint(job_dir / record["checkpoint"], root / "export")
    return record, (done.path / "README.md").read_text(), done.path


def test_a_smoke_evaluation_is_marked_on_the_card_with_its_samples_and_stderr(smoke_card):
    record, card, _ = smoke_card
    section = card.split("## Downstream (lm-evaluation-harness)", 1)[1]
    assert "A smoke test, not a result" in section and "`eval.limit=3`" in section
    assert f"lm-evaluation-harness {record['eval']['lm_eval_version']}" in section
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| task")]
    assert rows, section
    for task, metrics in record["eval"]["tasks"].items():
        for metric, value in metrics.items():
            if "_stderr" in metric or value is None:
                continue
            (row,) = [r for r in rows if r.startswith(f"| {task} | {metric} |")]
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert int(cells[4].replace(",", "")) == record["eval"]["n_samples"][task]  # examples behind the score
            stderr = metrics.get(f"{metric}_stderr")
            if stderr is None:
                assert cells[3] == "—"
            else:  # shown to 4 significant digits
                assert float(cells[3].replace(",", "")) == pytest.approx(stderr, rel=5e-4)


def test_a_smoke_evaluation_is_never_declared_in_the_model_index(smoke_card):
    _, card, _ = smoke_card
    meta = front_matter(card)
    assert meta["license"] == "mit" and meta["library_name"] == "transformers"
    assert "model-index" not in meta


def test_every_exported_file_gets_the_mode_a_plain_open_gives(smoke_card):
    """transformers' save_pretrained writes model.safetensors 0600; a shared export folder must be
    readable as every record file is (0666 / 0777 minus the umask, docs/record.md)."""
    import os

    umask = os.umask(0)
    os.umask(umask)
    folder = smoke_card[2]
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert modes["model.safetensors"] == 0o666 & ~umask
    assert set(modes.values()) == {0o666 & ~umask}, modes
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_full_evaluation_is_declared_in_the_model_index_as_the_record_says():
    from fixedcode_study.hub.card import _model_index

    evaluation = {"tasks": {"arc_easy": {"acc": 0.41, "acc_stderr": 0.01, "acc_norm": 0.38}},
                  "settings": {"limit": None, "num_fewshot": 0}}
    meta = yaml.safe_load("\n".join(_model_index("`gf2` input", evaluation)))
    (entry,) = meta["model-index"]
    assert entry["name"] == "fixedcode-study gf2 input"
    (result,) = entry["results"]
    assert result["dataset"]["name"] == "arc_easy"
    assert [(m["type"], m["value"]) for m in result["metrics"]] == [("acc", 0.41), ("acc_norm", 0.38)]
    assert _model_index("x", {**evaluation, "settings": {"limit": 20}}) == []
