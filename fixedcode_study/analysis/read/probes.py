"""Read representation-probe results (`fixedcode probe`) for a Study's included jobs.

Two files, written by fixedcode_study/probing/run.py (definitions of every measure:
fixedcode_study/probing/__init__.py):
- ``probes.json`` beside a job's results.json: every probed model of the job (init, step-* snapshots,
  final), each with per-layer token-identity probes, code-bit probes, geometry and type-vector
  similarities;
- ``probes_cross.json`` in a probed study directory: layer x layer linear CKA and per-layer type-vector
  similarity between every pair of final models.

Freshness: a probes.json is used only when its subject's job_fingerprint and job_finished_at equal the
job's current results.json (fingerprint.sha, finished_at, as the run reader read them), i.e. it measured the weights the job's
numbers come from; otherwise it is left out with a note. A cross pair is used only when both of its
jobs are included and pass the same check. probes_cross.json files are looked for in every source
directory and in every directory between a source and an included job.

Frames (tidy, one value per row):
- ``values``: run, label (init / step-XXXXXXX / final), order (position in the job's file), step,
  tokens_seen, layer_index, layer, n_layers, measure, value, reference (vs_reference rows: the learned
  checkpoint compared with), plus the job's sweep, job_key, input, variant, variant_order, model, seed, data.
- ``pairs``: a_run, b_run (a first in variant order, then seed), their variant/input/seed, model, data,
  kind (e.g. "learned vs binary16", "learned vs learned (across seeds)"; None for pairs no table uses:
  different seeds of different variants, different models), category, measure (cka, tv_rsa,
  tv_knn_overlap, tv_cka), a/b layer index and name, value, cross_file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...record.jobdir import CROSS_FILE, CROSS_GLOB, PROBES_FILE, RESULTS_FILE
from .records import display_path
SCHEMA = 1
RERUN = "re-run fixedcode probe"
FINAL, INIT = "final", "init"
CROSS_INPUT, SELF = "different inputs, same seed", "same input, different seeds"
JOB_COLUMNS = ["sweep", "job_key", "input", "variant", "variant_order", "model", "seed", "data"]
VALUE_COLUMNS = ["run", "label", "order", "step", "tokens_seen", "layer_index", "layer", "n_layers", "measure",
                 "value", "reference"]
PAIR_COLUMNS = ["a_run", "b_run", "a_variant", "b_variant", "a_input", "b_input", "a_seed", "b_seed", "model", "data",
                "kind", "category", "measure", "a_layer_index", "a_layer", "b_layer_index", "b_layer", "value",
                "cross_file"]


@dataclass
class ProbeData:
    values: pd.DataFrame
    pairs: pd.DataFrame
    records: dict[str, dict] = field(default_factory=dict)   # run -> its (fresh) probes.json
    cross_files: list[str] = field(default_factory=list)     # probes_cross.json files with a pair used
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.values.empty

    def samples(self) -> list[tuple[dict, list[str]]]:
        """Distinct token samples (probes.json `sample`, by windows_sha) and the runs probed on each."""
        seen: dict[str, tuple[dict, list[str]]] = {}
        for run, record in self.records.items():
            sample = record.get("sample") or {}
            seen.setdefault(str(sample.get("windows_sha")), (sample, []))[1].append(run)
        return list(seen.values())


def job_identity(jobs: pd.DataFrame) -> dict[str, dict]:
    """run -> what results.json says the job is now (fingerprint.sha, finished_at), from the job rows
    read/runs.py made: results.json is read once, by the run reader, and never again here."""
    cols = [c for c in ("fingerprint_sha", "finished_at") if c in jobs]
    rows = jobs.drop_duplicates("run").set_index("run")[cols] if cols else pd.DataFrame(index=jobs["run"].unique())
    return {str(run): {"sha": _text(r.get("fingerprint_sha")), "finished_at": _text(r.get("finished_at"))}
            for run, r in rows.to_dict("index").items()}


def _text(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def staleness(subject: dict, job: dict) -> str:
    """'' when the probes measured the job as its results.json describes it now (`job`: job_identity's
    entry); else why not."""
    fingerprint, finished = job.get("sha"), job.get("finished_at")
    if subject.get("job_fingerprint") != fingerprint:
        return (f"its job fingerprint {str(subject.get('job_fingerprint'))[:12]} differs from {RESULTS_FILE}'s "
                f"{str(fingerprint)[:12]}")
    if subject.get("job_finished_at") != finished:
        return (f"it was measured on the job finished at {subject.get('job_finished_at')}, "
                f"{RESULTS_FILE} says {finished}")
    return ""


def _read_json(path: Path) -> tuple[dict | None, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None, f"schema {data.get('schema') if isinstance(data, dict) else '?'} is not {SCHEMA}"
    return data, ""


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def entry_rows(run: str, order: int, entry: dict) -> list[dict]:
    """One probes.json checkpoint entry -> tidy rows (every measure at every layer)."""
    layers = list(entry.get("layers") or [])
    base = {"run": run, "label": entry.get("label"), "order": order, "step": _number(entry.get("step")),
            "tokens_seen": _number(entry.get("tokens_seen")), "n_layers": len(layers), "reference": None}
    per_layer: list[tuple[str, list, str | None]] = []   # (measure, values per layer, reference)
    for offset, probes in (entry.get("identity") or {}).items():
        name = f"identity_{offset}"
        for key, suffix in (("accuracy", ""), ("majority", "_majority"), ("ci_low", "_ci_low"),
                            ("ci_high", "_ci_high"), ("coverage", "_coverage")):
            per_layer.append((name + suffix, [p.get(key) for p in probes], None))
    if entry.get("bits"):
        for key, measure in (("mean_accuracy", "bits_mean"), ("min_accuracy", "bits_min"),
                             ("majority_mean", "bits_majority")):
            per_layer.append((measure, [b.get(key) for b in entry["bits"]], None))
    for measure, values in (entry.get("geometry") or {}).items():
        per_layer.append((measure, values, None))
    for against, sims in (entry.get("type_vectors") or {}).items():
        reference = (sims.get("reference") or {}).get("checkpoint") if against == "vs_reference" else None
        for measure, values in sims.items():
            if measure != "reference":
                per_layer.append((f"{against}_{measure}", values, reference))
    rows = []
    for measure, values, reference in per_layer:
        for i, (layer, value) in enumerate(zip(layers, values or [], strict=False)):
            rows.append(base | {"layer_index": i, "layer": layer, "measure": measure, "value": _number(value),
                                "reference": reference})
    return rows


def cross_dirs(sources: list[str], job_dirs: list[Path]) -> list[Path]:
    """Every source directory and every directory between a source and an included job."""
    roots = [Path(s).resolve() for s in sources if Path(s).is_dir()]
    found = set(roots)
    for job in job_dirs:
        for root in roots:
            if root in job.parents:
                here = job.parent
                while here != root:
                    found.add(here)
                    here = here.parent
    return sorted(found)


def _job_dirs(jobs: pd.DataFrame) -> dict[Path, str]:
    """Resolved job directory -> run, for included jobs that live on disk (W&B runs do not)."""
    out = {}
    for run in jobs["run"]:
        path = Path(str(run)).resolve()
        if (path / RESULTS_FILE).is_file():
            out[path] = run
    return out


def load_probes(study) -> ProbeData:
    jobs = study.included_jobs
    dirs = _job_dirs(jobs)
    notes: list[str] = []
    results = job_identity(jobs)
    records: dict[str, dict] = {}
    rows: list[dict] = []
    for path, run in list(dirs.items()):
        probe_path = path / PROBES_FILE
        if not probe_path.is_file():
            continue
        record, problem = _read_json(probe_path)
        if record is None:
            notes.append(f"{run}: probes.json left out, {problem}")
            continue
        why = staleness(record.get("subject") or {}, results[run])
        if why:
            notes.append(f"{run}: probes.json left out ({why}): probes.json predates the job's current weights: "
                         f"{RERUN} checkpoint={run}")
            continue
        records[run] = record
        for order, entry in enumerate(record.get("models") or []):
            rows.extend(entry_rows(run, order, entry))
    values = pd.DataFrame(rows, columns=VALUE_COLUMNS)
    values = _drop_stale_references(values, records, dirs, notes)
    values = _with_job_columns(values, jobs, "run", "")
    notes += _setting_notes(records)
    pairs, used_files = load_pairs(study, dirs, results, notes)
    return ProbeData(values, pairs, records, used_files, notes)


def _drop_stale_references(values: pd.DataFrame, records: dict[str, dict], dirs: dict[Path, str],
                           notes: list[str]) -> pd.DataFrame:
    """vs_reference rows whose learned reference has since been retrained (its own fresh probes.json
    measured different final weights) compare with a table that no longer exists: left out."""
    final_sha = {}
    for run, record in records.items():
        entries = [e for e in record.get("models") or [] if e.get("label") == FINAL]
        if entries:
            final_sha[Path(str(run)).resolve()] = entries[-1].get("weights_sha")
    stale = set()
    for run, record in records.items():
        for entry in record.get("models") or []:
            about = ((entry.get("type_vectors") or {}).get("vs_reference") or {}).get("reference") or {}
            checkpoint = about.get("checkpoint")
            if not checkpoint:
                continue
            job = Path(checkpoint).resolve().parent.parent  # <job>/checkpoints/final
            if job in final_sha and final_sha[job] != about.get("weights_sha"):
                stale.add(run)
    for run in sorted(stale):
        notes.append(f"{run}: type vectors vs the learned table left out: its reference weights differ from the "
                     f"learned job's current final weights; {RERUN}")
    if not stale:
        return values
    return values[~(values["run"].isin(stale) & values["measure"].str.startswith("vs_reference_"))]


def _with_job_columns(frame: pd.DataFrame, jobs: pd.DataFrame, key: str, prefix: str,
                      columns: list[str] = JOB_COLUMNS) -> pd.DataFrame:
    per_job = jobs.drop_duplicates("run").set_index("run")
    for col in columns:
        values = per_job[col] if col in per_job else pd.Series(np.nan, index=per_job.index)
        frame[prefix + col] = frame[key].map(values) if len(frame) else pd.Series(dtype=object)
    return frame


def _setting_notes(records: dict[str, dict]) -> list[str]:
    """Probe numbers pooled over jobs must come from the same settings and probing code."""
    notes = []
    for what, get in (("settings", lambda r: r.get("settings")),
                      ("probing code", lambda r: (r.get("code") or {}).get("probing_sha"))):
        kinds = {json.dumps(get(r), sort_keys=True, default=str) for r in records.values()}
        if len(kinds) > 1:
            notes.append(f"probes.json files of the included jobs were measured with {len(kinds)} different probe "
                         f"{what}; pooled probe numbers may not be comparable ({RERUN} on the whole study)")
    return notes


def _match_subject(subject: dict, cross_dir: Path, dirs: dict[Path, str], results: dict[str, dict]) -> str | None:
    """The included run a cross-file subject describes: by its job_dir, or (a study moved after probing)
    the job of the same name under the cross file's directory with the same fingerprint and finish time."""
    job_dir = subject.get("job_dir")
    if job_dir and Path(job_dir).resolve() in dirs:
        return dirs[Path(job_dir).resolve()]
    candidates = [run for path, run in dirs.items()
                  if path.name == subject.get("name") and cross_dir in path.parents
                  and not staleness(subject, results.get(run, {}))]
    return candidates[0] if len(candidates) == 1 else None


def load_pairs(study, dirs: dict[Path, str], results: dict[str, dict],
               notes: list[str]) -> tuple[pd.DataFrame, list[str]]:
    jobs = study.included_jobs.drop_duplicates("run").set_index("run")
    rows: list[dict] = []
    used_files: list[str] = []
    seen: set[frozenset] = set()
    for path in (p for directory in cross_dirs(study.sources, list(dirs))
                 for p in sorted(directory.glob(CROSS_GLOB)) if p.is_file()):
        record, problem = _read_json(path)
        path_shown = display_path(path)  # a committed table names it relative to the checkout, as it names runs
        if record is None:
            notes.append(f"{path_shown}: left out, {problem}")
            continue
        subjects = {s.get("name"): s for s in record.get("subjects") or []}
        runs = {name: _match_subject(s, path.parent, dirs, results) for name, s in subjects.items()}
        stale = sorted(name for name, run in runs.items() if run is not None and staleness(subjects[name], results[run]))
        outside = sorted(name for name, run in runs.items() if run is None)
        used = repeated = 0
        for pair in record.get("pairs") or []:
            a, b = runs.get(pair.get("a")), runs.get(pair.get("b"))
            if a is None or b is None or pair.get("a") in stale or pair.get("b") in stale:
                continue
            if frozenset((a, b)) in seen:
                repeated += 1
                continue
            seen.add(frozenset((a, b)))
            rows.extend(pair_rows(pair, a, b, jobs, path_shown))
            used += 1
        if used:
            used_files.append(path_shown)
        if stale:
            notes.append(f"{path_shown}: pairs with {', '.join(stale)} left out: probes_cross.json predates the job's "
                         f"current weights: {RERUN} on the study")
        if outside:
            notes.append(f"{path_shown}: pairs with {len(outside)} job(s) not included in this report left out "
                         f"({', '.join(outside[:4])}{' ...' if len(outside) > 4 else ''})")
        if repeated:
            notes.append(f"{path_shown}: {repeated} pair(s) already read from another probes_cross.json were counted once")
    return pd.DataFrame(rows, columns=PAIR_COLUMNS), used_files


def pair_kind(a: pd.Series, b: pd.Series) -> tuple[str | None, str | None]:
    """(kind label, category) of a pair of job rows ordered a <= b; (None, None) for pairs no summary uses."""
    if a["model"] != b["model"] or a["data"] != b["data"]:
        return None, None
    if a["variant"] == b["variant"]:
        return (f"{a['variant']} vs {b['variant']} (across seeds)", SELF) if a["seed"] != b["seed"] else (None, None)
    if pd.notna(a["seed"]) and a["seed"] == b["seed"]:
        return f"{a['variant']} vs {b['variant']}", CROSS_INPUT
    return None, None


def pair_rows(pair: dict, a_run: str, b_run: str, jobs: pd.DataFrame, cross_file: str) -> list[dict]:
    """One pair of probes_cross.json -> tidy rows, oriented so a comes first in variant order, then seed."""
    a_layers, b_layers = list(pair.get("a_layers") or []), list(pair.get("b_layers") or [])
    cka = np.asarray(pair.get("cka") or np.zeros((0, 0)), dtype=float).reshape(len(a_layers), len(b_layers))
    ja, jb = jobs.loc[a_run], jobs.loc[b_run]

    def rank(job, run):
        seed = job["seed"]
        return (job["variant_order"], -math.inf if pd.isna(seed) else float(seed), run)

    if rank(jb, b_run) < rank(ja, a_run):
        a_run, b_run, ja, jb, a_layers, b_layers, cka = b_run, a_run, jb, ja, b_layers, a_layers, cka.T
    kind, category = pair_kind(ja, jb)
    base = {"a_run": a_run, "b_run": b_run, "a_variant": ja["variant"], "b_variant": jb["variant"],
            "a_input": ja["input"], "b_input": jb["input"], "a_seed": ja["seed"], "b_seed": jb["seed"],
            "model": ja["model"], "data": ja["data"], "kind": kind, "category": category, "cross_file": cross_file}
    rows = [base | {"measure": "cka", "a_layer_index": i, "a_layer": la, "b_layer_index": j, "b_layer": lb,
                    "value": float(cka[i, j])}
            for i, la in enumerate(a_layers) for j, lb in enumerate(b_layers)]
    # type vectors: per layer name both models have, in the order of the file's a model
    file_a = pair.get("a_layers") or []
    shared = [name for name in file_a if name in (pair.get("b_layers") or [])]
    for measure, values in (pair.get("type_vectors") or {}).items():
        for name, value in zip(shared, values, strict=False):
            rows.append(base | {"measure": f"tv_{measure}", "a_layer_index": a_layers.index(name), "a_layer": name,
                                "b_layer_index": b_layers.index(name), "b_layer": name, "value": _number(value)})
    return rows
