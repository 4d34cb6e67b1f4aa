"""The probe command end to end: a real (tiny) study trained by the run app with snapshots, probed
by `fixedcode probe` over the study directory, with answers known in advance.

Both commands run in this process (helpers.cli.run_cli, cli.probe.main: the same exit codes and
files as a subprocess): a process of their own added only its start-up (~8 s each, and one per
parallel-launcher worker), and the parallel launcher has tests of its own (test_launcher.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.cli import run_cli
from helpers.distributed import TINY

STUDY = [*TINY, "train.tokens=8192", "input=learned,binary16", "seed=1,2", "checkpoint.keep_every_steps=4",
         "name=probe_study"]
PROBE = ["probe.tokens=2048", "probe.classes=64", "probe.type_vectors=64", "probe.type_min_count=2"]


@pytest.fixture(scope="module")
def probed_study(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("probe")
    run = run_cli(["-m", *STUDY, f"out_root={root}", "hydra/launcher=basic"], cwd=root)
    assert run.returncode == 0, run.stderr[-3000:]
    study = root / "multirun" / "probe_study"
    from fixedcode_study.cli.probe import main as probe

    assert probe([f"checkpoint={study}", *PROBE]) == 0
    return study


def job_dir(study: Path, input_name: str, seed: int) -> Path:
    """The job directory of (input, seed): its name holds every override, so look at the records."""
    for results in study.glob("*/results.json"):
        record = json.loads(results.read_text())
        if record["input"] == input_name and record["seed"] == seed:
            return results.parent
    raise AssertionError(f"no job {input_name} seed {seed} in {study}")


def job(study: Path, input_name: str, seed: int) -> dict:
    return json.loads((job_dir(study, input_name, seed) / "probes.json").read_text())


def entry(record: dict, label: str) -> dict:
    return next(e for e in record["models"] if e["label"] == label)


def test_every_job_gets_init_snapshots_and_final_over_every_layer(probed_study):
    record = job(probed_study, "binary16", 1)
    labels = [e["label"] for e in record["models"]]
    assert labels == ["init", "step-0000004", "final"]
    steps = [e["step"] for e in record["models"]]
    assert steps == [0, 4, 8] and record["models"][-1]["tokens_seen"] == 8192
    layers = ["input", "block1", "block2", "final_norm"]  # test_micro: 2 blocks
    assert all(e["layers"] == layers for e in record["models"])
    assert set(entry(record, "final")["identity"]) == {"offset0", "offset1", "offset2"}
    results = json.loads((job_dir(probed_study, "binary16", 1) / "results.json").read_text())
    assert record["subject"]["job_fingerprint"] == results["fingerprint"]["sha"]
    # the final entry measured the weights the job wrote, the snapshot its own (different) weights
    assert entry(record, "final")["weights_sha"] != entry(record, "step-0000004")["weights_sha"]


def test_input_layer_known_answers(probed_study):
    """A fixed binary code is linearly decodable at the input layer: every non-constant bit at
    accuracy 1 and the token itself at accuracy 1; the learned table (distinct rows) too."""
    for seed in (1, 2):
        final = entry(job(probed_study, "binary16", seed), "final")
        bits = final["bits"][0]
        assert bits["mean_accuracy"] == 1.0 and bits["min_accuracy"] == 1.0
        assert bits["constant_bits"] == [9, 10, 11, 12, 13, 14, 15]  # V = 512 = 2^9
        assert final["identity"]["offset0"][0]["accuracy"] == 1.0
        learned = entry(job(probed_study, "learned", seed), "final")
        assert learned["bits"] is None  # no code to probe
        assert learned["identity"]["offset0"][0]["accuracy"] == 1.0
        # the input layer holds nothing about the previous token: no better than the majority class
        prev = final["identity"]["offset1"][0]
        assert prev["accuracy"] <= prev["majority"] + 0.05


def test_type_vectors_compare_with_the_same_seeds_learned_table(probed_study):
    learned = entry(job(probed_study, "learned", 1), "final")
    ref = learned["type_vectors"]["vs_reference"]
    assert ref["reference"]["name"] == job_dir(probed_study, "learned", 1).name
    assert ref["rsa"][0] == pytest.approx(1.0) and ref["knn_overlap"][0] == 1.0 and ref["cka"][0] == pytest.approx(1.0)
    fixed = entry(job(probed_study, "binary16", 2), "final")["type_vectors"]["vs_reference"]
    assert fixed["reference"]["name"] == job_dir(probed_study, "learned", 2).name
    assert fixed["rsa"][0] < 0.9  # a binary code is not the learned table's geometry


def test_cross_model_cka_has_known_answers(probed_study):
    cross = json.loads((probed_study / "probes_cross.json").read_text())
    assert len(cross["pairs"]) == 6  # 4 jobs
    pair = {(p["a_input"], p["a_seed"], p["b_input"], p["b_seed"]): p for p in cross["pairs"]}
    same_code = pair[("binary16", 1, "binary16", 2)]
    # both seeds feed the same fixed code: identical input layers
    assert same_code["cka"][0][0] == pytest.approx(1.0, abs=1e-9)
    tables = pair[("learned", 1, "learned", 2)]
    assert tables["cka"][0][0] < 0.99  # two learned tables from different seeds are not the same
    for p in cross["pairs"]:
        m = np.array(p["cka"])
        assert m.shape == (4, 4) and np.all((m > -1e-9) & (m < 1 + 1e-9))


def test_probe_settings_errors_are_one_line(probed_study, capsys):
    from fixedcode_study.cli.probe import main

    for args, field in [([f"checkpoint={probed_study}", "probe.train_fraction=1.0"], "probe.train_fraction"),
                        ([f"checkpoint={probed_study / 'nope'}"], "checkpoint"),
                        ([f"checkpoint={probed_study}", "optim.lr=1"], "optim.lr"),
                        ([f"checkpoint={probed_study}", "probe.method=svm"], "probe.method"),
                        ([f"checkpoint={probed_study}", "probe.prepared_root=/nonexistent"], "probe.prepared_root"),
                        ([], "checkpoint")]:
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {field}"), (args, err)
