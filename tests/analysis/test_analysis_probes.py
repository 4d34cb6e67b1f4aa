"""Representation probes in the report (fixedcode_study.analysis.read.probes, tables_probes, figures_probes).

Synthetic probes.json / probes_cross.json files follow fixedcode_study/probing/run.py's schema exactly,
with known values (the formulas below), beside the synthetic jobs of tests/helpers/analysis.py.
The study: learned/binary16/gf2 x seeds 1-3 (+ the helper's failed/running jobs), where
- binary16 seed 3's probes.json predates its job (a different job fingerprint) and
- gf2 seed 3's probes.json records a different finish time;
both carry poison values (POISON) that must not reach any table, and their cross pairs must be dropped;
- learned seed 1 kept 3 snapshots, so the over-training figure has one job to draw.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers, without a conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import analysis as fx
from helpers.analysis import md_rows

from fixedcode_study.analysis.figures.probes import probe_training_figure
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.read.probes import ProbeData, load_probes
from fixedcode_study.analysis.report import write_report

PM = "±"
LAYERS = ["input", "block1", "block2", "final_norm"]
OFFSETS = (0, 1, 2)
NAMES = ("learned", "binary16", "gf2")
IDENTITY = {"learned": 0.40, "binary16": 0.50, "gf2": 0.60}
REFERENCE_RSA = {"learned": 0.60, "binary16": 0.10, "gf2": 0.05}
CKA_BASE = {("learned", "binary16"): 0.30, ("learned", "gf2"): 0.40, ("binary16", "gf2"): 0.50, "self": 0.80,
            "other": 0.05}  # "other": different inputs at different seeds, used by no table
POISON = 0.987654
STALE_FINGERPRINT = ("binary16", 3)
STALE_FINISH = ("gf2", 3)
SNAPSHOTS = {("learned", 1): [64, 128, 192]}
TOKENS_PER_STEP = 2048


# ------------------------------------------------------------------ known values


def identity(name: str, seed: int, layer: int, offset: int, label: str) -> float:
    if label == "init":
        return 0.05 + 0.01 * layer + 0.001 * offset
    progress = 1.0 if label == "final" else 0.5
    return progress * (IDENTITY[name] + 0.05 * layer - 0.1 * offset + 0.01 * (seed - 2))


def majority(offset: int) -> float:
    return 0.2 + 0.001 * offset


def bits_mean(name: str, seed: int, layer: int) -> float:
    return 0.95 - 0.01 * layer + 0.002 * seed


def effective_rank(name: str, seed: int, layer: int, label: str) -> float:
    return (5.0 if label == "init" else 10.0) + 3 * layer + seed + (name == "gf2")


def anisotropy(layer: int) -> float:
    return 0.3 + 0.01 * layer


def reference_rsa(name: str, seed: int, layer: int, label: str) -> float:
    return (0.5 if label not in ("final", "init") else 1.0) * (REFERENCE_RSA[name] + 0.1 * layer + 0.01 * seed)


def cka(kind, seed_a: int, i: int, j: int) -> float:
    """CKA of layer i of model a with layer j of model b, a first in variant order (learned, binary16, gf2)."""
    return CKA_BASE[kind] + 0.01 * i + 0.001 * j + 0.002 * seed_a


# ------------------------------------------------------------------ writers (the probe side's schema)


def stamp(job: Path) -> dict:
    """Give a synthetic job what real results.json files carry: fingerprint.sha and finished_at."""
    results = json.loads((job / "results.json").read_text())
    results["fingerprint"] = {"sha": f"fp-{job.name}", "code_sha": "c" * 64}
    results["finished_at"] = f"2026-11-30T16:{len(job.name):02d}:00+0000"
    (job / "results.json").write_text(json.dumps(results))
    return results


def subject_of(job: Path, results: dict, *, fingerprint: str | None = None, finished: str | None = None) -> dict:
    return {"name": job.name, "input": results["input"], "seed": results["seed"],
            "final_checkpoint": str(job / "checkpoints" / "final"), "job_dir": str(job),
            "job_fingerprint": fingerprint or results["fingerprint"]["sha"],
            "job_finished_at": finished or results["finished_at"], "data_cache_key": "k"}


SAMPLE = {"windows": 8, "seq_len": 64, "first_position": 2, "train_windows": 6, "rows": 496, "train_rows": 372,
          "classes": 32, "type_vectors": 32, "type_min_count_seen": 4, "class_coverage": 0.625, "windows_sha": "ab" * 32}
SETTINGS = {"tokens": 512, "seq_len": None, "train_fraction": 0.75, "classes": 32, "offsets": list(OFFSETS),
            "bits": True, "type_vectors": 32, "type_min_count": 4, "knn_k": 10, "method": "lda", "ridge": 0.01,
            "max_iter": 100, "C": 1.0, "anisotropy_pairs": 2000, "batch_size": 32, "seed": 0}


def entry(name: str, seed: int, label: str, step: int, study: Path, poison: bool = False) -> dict:
    """One checkpoint entry; vs_reference compares with the learned job of the same seed in `study`."""
    def value(v: float) -> float:
        return POISON if poison else v

    n = len(LAYERS)
    probe = {"ci_low": 0.0, "ci_high": 1.0, "n_train": 300, "n_test": 100, "n_classes": 32, "converged": True,
             "n_unseen": 0, "coverage": 0.625}
    bits = None
    if name != "learned":
        bits = [{"per_bit": [1.0] * 12 + [None] * 4, "mean_accuracy": value(bits_mean(name, seed, i)),
                 "min_accuracy": 0.9, "constant_bits": [12, 13, 14, 15], "n_train": 372, "n_test": 124,
                 "majority_mean": 0.6, "converged": True} for i in range(n)]
    learned = study / f"input=learned,seed={seed}"
    return {
        "label": label, "step": step, "tokens_seen": step * TOKENS_PER_STEP,
        "source": "" if label == "init" else f"{label}.ckpt", "weights_sha": f"w-{name}-{seed}-{label}",
        "layers": LAYERS,
        "identity": {f"offset{k}": [probe | {"accuracy": value(identity(name, seed, i, k, label)),
                                             "majority": majority(k)} for i in range(n)] for k in OFFSETS},
        "bits": bits,
        "geometry": {"effective_rank": [value(effective_rank(name, seed, i, label)) for i in range(n)],
                     "anisotropy": [value(anisotropy(i)) for i in range(n)]},
        "type_vectors": {
            "vs_input": {m: [1.0 - 0.1 * i for i in range(n)] for m in ("rsa", "knn_overlap", "cka")},
            "vs_reference": {"rsa": [value(reference_rsa(name, seed, i, label)) for i in range(n)],
                             "knn_overlap": [0.2] * n, "cka": [0.3] * n,
                             "reference": {"name": learned.name, "seed": seed,
                                           "checkpoint": str(learned / "checkpoints" / "final"),
                                           "weights_sha": f"w-learned-{seed}-final"}}},
    }


def write_probes(job: Path, results: dict, subject: dict, snapshots: list[int] = (), poison: bool = False) -> dict:
    name, seed = results["input"], results["seed"]
    checkpoints = [entry(name, seed, "init", 0, job.parent, poison)]
    checkpoints += [entry(name, seed, f"step-{s:07d}", s, job.parent, poison) for s in snapshots]
    checkpoints.append(entry(name, seed, "final", 200, job.parent, poison))
    record = {"schema": 1, "subject": subject, "settings": SETTINGS, "sample": SAMPLE,
              "code": {"probing_sha": "p" * 64, "torch": "2.5.0"}, "seconds": 1.0, "models": checkpoints}
    (job / "probes.json").write_text(json.dumps(record))
    return record


def kind_of(a: tuple[str, int], b: tuple[str, int]):
    if a[0] == b[0]:
        return "self"
    return (a[0], b[0]) if a[1] == b[1] else "other"


def write_cross(study_dir: Path, subjects: dict[tuple[str, int], dict]) -> None:
    """Every pair, in the probe's own order (job directory names sorted: binary16 < gf2 < learned), so the
    learned pairs are written with learned second and must be turned around by the analysis."""
    order = sorted(subjects, key=lambda k: subjects[k]["name"])
    rank = {name: i for i, name in enumerate(NAMES)}
    pairs = []
    for x, a in enumerate(order):
        for b in order[x + 1:]:
            first, second = sorted((a, b), key=lambda k: (rank[k[0]], k[1]))
            kind = kind_of(first, second)
            m = np.array([[cka(kind, first[1], i, j) for j in range(len(LAYERS))] for i in range(len(LAYERS))])
            if first != a:
                m = m.T
            pairs.append({"a": subjects[a]["name"], "b": subjects[b]["name"], "a_input": a[0], "b_input": b[0],
                          "a_seed": a[1], "b_seed": b[1], "a_layers": LAYERS, "b_layers": LAYERS, "cka": m.tolist(),
                          "type_vectors": {"rsa": [0.5] * len(LAYERS), "knn_overlap": [0.4] * len(LAYERS),
                                           "cka": [float(np.diag(m)[i]) for i in range(len(LAYERS))]}})
    record = {"schema": 1, "settings": SETTINGS, "sample": SAMPLE, "code": {"probing_sha": "p" * 64},
              "subjects": [subjects[k] for k in order], "pairs": pairs}
    (study_dir / "probes_cross.json").write_text(json.dumps(record))


def build_probed_study(root: Path) -> Path:
    sweep = fx.build_main_sweep(root)
    subjects = {}
    for name in NAMES:
        for seed in fx.SEEDS:
            job = sweep / f"input={name},seed={seed}"
            results = stamp(job)
            stale = {}
            if (name, seed) == STALE_FINGERPRINT:
                stale["fingerprint"] = "fp-of-an-earlier-run"
            if (name, seed) == STALE_FINISH:
                stale["finished"] = "2026-11-29T09:00:00+0000"
            subject = subject_of(job, results, **stale)
            write_probes(job, results, subject, SNAPSHOTS.get((name, seed), ()), poison=bool(stale))
            subjects[(name, seed)] = subject
    write_cross(sweep, subjects)
    return sweep



@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("probed")
    sweep = build_probed_study(root)
    out = root / "report"
    write_report(load_run_dirs([sweep]), out)
    return sweep, out, (out / "report.md").read_text()


def fresh_seeds(name: str) -> list[int]:
    return [s for s in fx.SEEDS if (name, s) not in (STALE_FINGERPRINT, STALE_FINISH)]


# ------------------------------------------------------------------ tables


def test_identity_table_holds_the_means_over_fresh_seeds(probed):
    _, out, _ = probed
    data = pd.read_csv(out / "tables" / "probes_identity.csv")
    rows = {(r[0], r[1]): r for r in md_rows(out / "tables" / "probes_identity.md")}
    for name in NAMES:
        seeds = fresh_seeds(name)
        for layer, layer_name in enumerate(LAYERS):
            row = rows[(name, layer_name)]
            assert row[2] == str(len(seeds))
            for k in OFFSETS:
                values = [identity(name, s, layer, k, "final") for s in seeds]
                hit = data[(data["variant"] == name) & (data["layer"] == layer_name) & (data["model_state"] == "final")
                           & (data["measure"] == f"identity_offset{k}")].iloc[0]
                assert hit["n"] == len(seeds) and np.isclose(hit["mean"], np.mean(values))
                assert np.isclose(hit["std"], np.std(values, ddof=1))
                assert row[3 + k] == f"{np.mean(values):.3f} {PM} {np.std(values, ddof=1):.3f}"
                # the init model is the random-feature baseline: its mean, no spread
                assert row[6 + k] == f"{identity(name, 1, layer, k, 'init'):.3f}"
                runs = sorted(Path(r).name for r in hit["runs"].split(";"))
                assert runs == [f"input={name},seed={s}" for s in seeds]
            assert row[9] == " / ".join(f"{majority(k):.3f}" for k in OFFSETS)


def test_geometry_table_bits_rank_and_rsa_vs_learned(probed):
    _, out, _ = probed
    rows = {(r[0], r[1]): r for r in md_rows(out / "tables" / "probes_geometry.md")}
    header = (out / "tables" / "probes_geometry.md").read_text().splitlines()[0]
    assert header == ("| input variant | layer | n | code-bit accuracy | effective rank | anisotropy | "
                      "RSA vs learned table |")
    for name in NAMES:
        seeds = fresh_seeds(name)
        for layer, layer_name in enumerate(LAYERS):
            row = rows[(name, layer_name)]
            bits = [bits_mean(name, s, layer) for s in seeds]
            assert row[3] == ("—" if name == "learned" else f"{np.mean(bits):.3f} {PM} {np.std(bits, ddof=1):.3f}")
            rank = [effective_rank(name, s, layer, "final") for s in seeds]
            assert row[4] == f"{np.mean(rank):.1f} {PM} {np.std(rank, ddof=1):.1f}"
            rsa = [reference_rsa(name, s, layer, "final") for s in seeds]
            assert row[6] == f"{np.mean(rsa):.3f} {PM} {np.std(rsa, ddof=1):.3f}"


def test_cka_table_diagonal_per_pair_kind_and_noise_floor(probed):
    _, out, _ = probed
    rows = md_rows(out / "tables" / "probes_cka.md")
    assert [r[0] for r in rows] == ["learned vs binary16", "learned vs gf2", "binary16 vs gf2",
                                    "learned vs learned (across seeds)", "binary16 vs binary16 (across seeds)",
                                    "gf2 vs gf2 (across seeds)"]
    by_kind = {r[0]: r for r in rows}
    expected_pairs = {  # (kind key, [(seed of a, seed of b)]): the stale jobs' pairs are gone
        "learned vs binary16": (("learned", "binary16"), [(1, 1), (2, 2)]),
        "learned vs gf2": (("learned", "gf2"), [(1, 1), (2, 2)]),
        "binary16 vs gf2": (("binary16", "gf2"), [(1, 1), (2, 2)]),
        "learned vs learned (across seeds)": ("self", [(1, 2), (1, 3), (2, 3)]),
        "binary16 vs binary16 (across seeds)": ("self", [(1, 2)]),
        "gf2 vs gf2 (across seeds)": ("self", [(1, 2)]),
    }
    for label, (kind, seeds) in expected_pairs.items():
        row = by_kind[label]
        assert row[2] == str(len(seeds)), label
        for i in range(len(LAYERS)):
            values = [cka(kind, a, i, i) for a, _ in seeds]
            want = f"{np.mean(values):.3f}" + (f" {PM} {np.std(values, ddof=1):.3f}" if len(values) > 1 else "")
            assert row[3 + i] == want, (label, i)
    data = pd.read_csv(out / "tables" / "probes_cka.csv")
    assert not np.isclose(data["mean"], CKA_BASE["other"], atol=0.02).any()  # different seeds, different inputs
    assert data["runs"].str.contains("input=binary16,seed=3").sum() == 0


def test_pairs_are_oriented_by_variant_order_whatever_the_file_says(probed):
    sweep, _, _ = probed
    probes = load_probes(load_run_dirs([sweep]))
    pairs = probes.pairs
    part = pairs[(pairs["kind"] == "learned vs binary16") & (pairs["measure"] == "cka") & (pairs["a_seed"] == 1)]
    assert set(part["a_variant"]) == {"learned"} and len(part) == len(LAYERS) ** 2
    for row in part.itertuples():  # written as binary16 (a) vs learned (b): the matrix must be transposed
        assert np.isclose(row.value, cka(("learned", "binary16"), 1, row.a_layer_index, row.b_layer_index))


# ------------------------------------------------------------------ freshness


def test_stale_probes_are_left_out_with_a_note_naming_the_job(probed):
    sweep, out, report = probed
    caveats = report.split("## Caveats and notes")[1].split("\n## ")[0]
    for name, seed in (STALE_FINGERPRINT, STALE_FINISH):
        key = f"input={name},seed={seed}"
        line = next(ln for ln in caveats.splitlines() if key in ln and "probes.json left out" in ln)
        assert "predates the job's current weights: re-run fixedcode probe" in line
    assert "fingerprint" in next(ln for ln in caveats.splitlines() if "input=binary16,seed=3" in ln)
    assert "finished at" in next(ln for ln in caveats.splitlines() if "input=gf2,seed=3" in ln)
    assert "probes_cross.json: pairs with input=binary16,seed=3, input=gf2,seed=3 left out" in caveats
    for name in ("probes_identity", "probes_geometry", "probes_cka"):
        text = (out / "tables" / f"{name}.csv").read_text() + (out / "tables" / f"{name}.md").read_text()
        assert "0.9876" not in text and "987" not in text
    assert f"{len(NAMES) * len(fx.SEEDS) - 2} included job(s) are used" in report


def test_a_probes_json_of_the_current_job_is_used_again(tmp_path):
    """The same stale file counts once its subject matches results.json (the rule is the fingerprint and time)."""
    sweep = build_probed_study(tmp_path)
    job = sweep / "input=binary16,seed=3"
    record = json.loads((job / "probes.json").read_text())
    results = json.loads((job / "results.json").read_text())
    record["subject"]["job_fingerprint"] = results["fingerprint"]["sha"]
    (job / "probes.json").write_text(json.dumps(record))
    probes = load_probes(load_run_dirs([sweep]))
    assert str(job) in {str(Path(r).resolve()) for r in probes.records}
    assert np.isclose(probes.values["value"], POISON).any()
    assert not any("input=binary16,seed=3: probes.json left out" in n for n in probes.notes)


# ------------------------------------------------------------------ figures and the report


def test_probe_figures_are_written_and_listed(probed):
    _, out, report = probed
    for stem in ("probe_layers", "probe_cka", "probe_training"):
        png = out / "figures" / f"{stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, stem
        assert (out / "figures" / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert f"](figures/{stem}.png)" in report
    section = report.split("## Representation probes")[1].split("\n## ")[0]
    assert "fixedcode_study/probing/__init__.py" in section
    assert f"{SAMPLE['rows']:,} held-out positions" in section and f"{SAMPLE['train_rows']:,} rows" in section
    assert f"{SAMPLE['classes']} most frequent token types, which cover 62.5%" in section
    assert "initial model" in section and "majority class" in section
    for title in ("Token identity per layer", "Geometry per layer", "Cross-model similarity per layer"):
        assert f"### {title}" in section


def test_training_figure_needs_snapshots(probed, tmp_path):
    sweep, _, _ = probed
    study = load_run_dirs([sweep])
    probes = load_probes(study)
    with_snapshots = probes.values.groupby("run")["label"].nunique()
    assert with_snapshots[with_snapshots > 2].index.map(lambda r: Path(r).name).tolist() == ["input=learned,seed=1"]
    without = ProbeData(probes.values[probes.values["label"].isin(["init", "final"])], probes.pairs)
    assert probe_training_figure(study, without, tmp_path) is None
    assert probe_training_figure(study, probes, tmp_path) is not None


def test_study_without_probes_renders_exactly_as_before(tmp_path, monkeypatch):
    import fixedcode_study.analysis.results as results_module
    import fixedcode_study.analysis.sections.probes as probe_section

    sweep = fx.build_main_sweep(tmp_path)
    write_report(load_run_dirs([sweep]), tmp_path / "with_probe_code")
    empty = ProbeData(pd.DataFrame(columns=["run", "label", "measure", "value"]), pd.DataFrame(columns=["kind"]))
    monkeypatch.setattr(results_module, "load_probes", lambda study: empty)
    monkeypatch.setattr(probe_section, "probe_figures", lambda *a, **k: [])
    write_report(load_run_dirs([sweep]), tmp_path / "without")
    a = (tmp_path / "with_probe_code" / "report.md").read_text()
    assert a == (tmp_path / "without" / "report.md").read_text()
    assert "Representation probes" not in a and "probe" not in a.replace(str(tmp_path), "").lower()
    assert not list((tmp_path / "with_probe_code").rglob("probe*"))


# ------------------------------------------------------------------ probe-only arms (probe_runs=)


@pytest.mark.slow
def test_probe_only_arms_enter_the_probes_and_no_comparison(tmp_path):
    """`probe_runs=`: gf2 is read beside a learned/binary16 study for the probe section alone, so the
    comparisons (and their Holm family) are exactly the two-arm study's, while its probes are in."""
    from fixedcode_study.cli.analyze import main as analyze

    sweep = build_probed_study(tmp_path)
    study_jobs = [str(p) for p in sorted(sweep.glob("input=*")) if "input=gf2" not in p.name]
    alone, with_arms = tmp_path / "alone", tmp_path / "with_arms"
    assert analyze([*study_jobs, f"out={alone}"]) == 0
    assert analyze([*study_jobs, f"probe_runs={sweep}", f"out={with_arms}"]) == 0

    for table in ("comparisons", "main_results", "params"):
        assert (with_arms / "tables" / f"{table}.csv").read_text() == (alone / "tables" / f"{table}.csv").read_text()
        assert "gf2" not in (with_arms / "tables" / f"{table}.csv").read_text()
    identity = pd.read_csv(with_arms / "tables" / "probes_identity.csv")
    assert "gf2" in set(identity["variant"]) and "gf2" not in set(pd.read_csv(alone / "tables" / "probes_identity.csv")["variant"])
    assert "binary16 vs gf2" in (with_arms / "tables" / "probes_cka.csv").read_text()  # the parent's cross file
    jobs = pd.read_csv(with_arms / "tables" / "jobs.csv")
    assert set(jobs.loc[jobs["probe_only"], "input"]) == {"gf2"} and not jobs.loc[~jobs["probe_only"], "input"].eq("gf2").any()
    report = (with_arms / "report.md").read_text()
    section = report.split("## Representation probes")[1].split("\n## ")[0]
    assert "**Probe-only arms.** gf2 (" in section and "never in a comparison" in section
    findings = report.split("## Findings")[1].split("\n## ")[0]
    rows = [ln for ln in findings.splitlines() if ln.startswith("- **")]
    assert rows and not [ln for ln in rows if "gf2" in ln]


def test_probe_roots_add_only_the_jobs_the_study_has_not_read(tmp_path):
    """probe_runs= usually names the study's own parent (`multirun/main probe_runs= multirun`): the
    second reading adds the probe-only arms and reads none of the study's jobs again, and the two
    readings together hold exactly the jobs one reading of every root finds."""
    from fixedcode_study.analysis.read.runs import collect_run_dirs

    sweep = build_probed_study(tmp_path)
    study_jobs = [p for p in sorted(sweep.glob("input=*")) if "input=gf2" not in p.name]
    first = collect_run_dirs(study_jobs)
    added = collect_run_dirs([sweep], already=first)
    assert {r["input"] for r in added.records} == {"gf2"}
    assert not {r["run"] for r in first.records} & {r["run"] for r in added.records}
    both = collect_run_dirs([*study_jobs, sweep])
    assert sorted(r["run"] for r in (first + added).records) == sorted(r["run"] for r in both.records)
    assert not collect_run_dirs([sweep], already=first + added).records  # nothing left to read


def test_probe_runs_without_the_studys_runs_is_a_one_line_error(tmp_path, capsys):
    from fixedcode_study.cli.analyze import main as analyze

    assert analyze([f"probe_runs={tmp_path}", "out=" + str(tmp_path / "r"), "wandb=e/p"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "probe_runs: needs the study's own RUN_DIRs" in err
