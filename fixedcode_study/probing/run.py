"""Probe jobs: measure every layer of every model, write probes.json per job and probes_cross.json
for a study. The measures themselves live in measures.py and linear.py; this module decides which
tokens, which models and which comparisons.

One sample of held-out tokens serves every model of a corpus, so cross-model comparisons see the
same tokens. Rows are positions >= max(offsets) of back-to-back windows (each has its previous
tokens in context); the first `train_fraction` of windows fit the linear probes and the rest test
them, so a probe is never tested on a window it was fitted on.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..inputs import LearnedEmbedding
from ..record import atomic
from ..record.jobdir import versions
from . import linear, measures
from .states import (ProbedModel, ProbeSubject, code_bits, final_model, heldout_windows, hidden_states,
                     init_model, input_table, snapshot_model, subject_summary)

PROBES_SCHEMA = 1


@dataclass
class Sample:
    """The probed tokens: rows are (window, position) with position >= max(offsets)."""

    windows: np.ndarray              # (n, T) int64
    first: int                       # first probed position in every window
    n_train_windows: int
    targets: dict[int, np.ndarray]   # offset -> (N,) token id at position - offset
    classes: np.ndarray              # token types the identity probes predict (most frequent first)
    types: np.ndarray                # token types with a type vector (most frequent first)
    type_counts: np.ndarray

    @property
    def ids(self) -> np.ndarray:
        return self.targets[0]

    @property
    def train(self) -> np.ndarray:
        """(N,) bool: the row's window fits the probes."""
        per_window = self.windows.shape[1] - self.first
        return np.repeat(np.arange(len(self.windows)) < self.n_train_windows, per_window)

    def rows(self, per_window: np.ndarray) -> np.ndarray:
        """(b, T, …) -> (b * (T - first), …): the probed positions, in row order."""
        return per_window[:, self.first:].reshape(-1, *per_window.shape[2:])


def make_sample(windows: np.ndarray, settings: Mapping[str, Any]) -> Sample:
    offsets = [int(o) for o in settings["offsets"]]
    first = max(offsets)
    if first >= windows.shape[1]:
        raise ValueError(f"probe.offsets: offset {first} needs windows longer than {windows.shape[1]} tokens")
    n_train = int(round(len(windows) * float(settings["train_fraction"])))
    if not 0 < n_train < len(windows):
        raise ValueError(f"probe.train_fraction: {settings['train_fraction']} leaves no window to fit or to test "
                         f"({len(windows)} windows)")
    T = windows.shape[1]
    targets = {o: windows[:, first - o:T - o].reshape(-1) for o in offsets}
    current = targets.get(0, windows[:, first:].reshape(-1))
    per_window = T - first
    train_ids = current[: n_train * per_window]
    types, counts = np.unique(train_ids, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    classes = types[order][: int(settings["classes"])]
    types_all, counts_all = np.unique(current, return_counts=True)
    order = np.argsort(-counts_all, kind="stable")
    keep = counts_all[order] >= int(settings["type_min_count"])
    tv_types = types_all[order][keep][: int(settings["type_vectors"])]
    tv_counts = counts_all[order][keep][: int(settings["type_vectors"])]
    return Sample(windows, first, n_train, targets, classes, tv_types, tv_counts)


def collect_states(pm: ProbedModel, sample: Sample, settings: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """{layer: (N, d) float32} hidden states at the sample's rows (the other positions are dropped batch by batch)."""
    parts: dict[str, list[np.ndarray]] = {}
    for _ids, states in hidden_states(pm.model, sample.windows, int(settings["batch_size"]), settings["device"] or "cpu"):
        for name, h in states.items():
            parts.setdefault(name, []).append(sample.rows(h))
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


def _similarity(x: np.ndarray, y: np.ndarray, k: int) -> dict[str, float]:
    return {"rsa": measures.rsa(x, y), "knn_overlap": measures.knn_overlap(x, y, k=k), "cka": measures.linear_cka(x, y)}


def _per_layer(rows: Sequence[Mapping[str, float]]) -> dict[str, list[float]]:
    """[{m: v} per layer] -> {m: [v per layer]}."""
    return {m: [float(r[m]) for r in rows] for m in rows[0]} if rows else {}


def measure_model(pm: ProbedModel, states: Mapping[str, np.ndarray], sample: Sample,
                  settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One model's entry of probes.json, and its type vectors per layer (for cross comparisons)."""
    layers = list(states)
    train = sample.train
    probe_kw = {"max_iter": int(settings["max_iter"]), "C": float(settings["C"]), "seed": int(settings["seed"]),
                "method": str(settings["method"]), "ridge": float(settings["ridge"])}
    identity: dict[str, list[dict[str, Any]]] = {}
    for offset, target in sample.targets.items():
        known = np.isin(target, sample.classes)  # rows whose target type is a probed class
        fit, test = train & known, ~train & known
        identity[f"offset{offset}"] = [
            {**linear.probe(states[name][fit], target[fit], states[name][test], target[test], **probe_kw).to_dict(),
             "coverage": float(known[~train].mean())}
            for name in layers
        ]
    bits = code_bits(pm.model, sample.ids) if settings["bits"] else None
    bit_probes = None
    if bits is not None:
        bit_probes = [linear.probe_bits(states[name][train], bits[train], states[name][~train], bits[~train], **probe_kw)
                      for name in layers]
    test_rows = ~train
    geometry = {
        "effective_rank": [measures.effective_rank(states[name][test_rows]) for name in layers],
        "anisotropy": [measures.anisotropy(states[name][test_rows], pairs=int(settings["anisotropy_pairs"]),
                                           seed=int(settings["seed"])) for name in layers],
    }
    type_vectors = {name: measures.type_vectors(states[name], sample.ids, sample.types)[0] for name in layers}
    k = int(settings["knn_k"])
    entry = {
        "label": pm.label, "step": pm.step, "tokens_seen": pm.tokens_seen, "source": pm.source,
        "weights_sha": pm.weights_sha, "layers": layers,
        "identity": identity, "bits": bit_probes, "geometry": geometry,
        # how far each layer's type geometry has moved from what the input layer gives the token
        "type_vectors": {"vs_input": _per_layer([_similarity(type_vectors[name], type_vectors["input"], k)
                                                  for name in layers])},
    }
    return entry, type_vectors


def compare_with_reference(entry: dict[str, Any], type_vectors: Mapping[str, np.ndarray],
                           reference: np.ndarray, about: Mapping[str, Any], k: int) -> None:
    """Each layer's type vectors against a learned model's input table rows for the same types."""
    entry["type_vectors"]["vs_reference"] = {
        **_per_layer([_similarity(type_vectors[name], reference, k) for name in entry["layers"]]),
        "reference": dict(about),
    }


def probe_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that change a probe number (device, paths and switches of what to probe do not)."""
    drop = {"device", "prepared_root", "save_states", "init", "snapshots", "cross", "reference", "name"}
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in settings.items() if k not in drop}


def code_sha() -> str:
    """sha256 of the probing package's source: probes.json says which code measured it."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def probe_subject(subject: ProbeSubject, sample: Sample, settings: Mapping[str, Any],
                  reference: tuple[np.ndarray, Mapping[str, Any]] | None,
                  say: Callable[[str], None] = print
                  ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Probe one job's models (init, snapshots, final); returns its probes.json and the final
    model's states and type vectors per layer (for cross_record)."""
    started = time.perf_counter()
    loaders: list[Callable[[], ProbedModel]] = []
    if settings["init"] and subject.seed is not None:
        loaders.append(lambda: init_model(subject))
    if settings["snapshots"]:
        loaders += [lambda p=p: snapshot_model(subject, p) for p in subject.snapshots]
    loaders.append(lambda: final_model(subject))
    entries, final_states, final_types = [], {}, {}
    for load in loaders:
        pm = load()
        states = collect_states(pm, sample, settings)
        entry, type_vectors = measure_model(pm, states, sample, settings)
        if reference is not None:
            compare_with_reference(entry, type_vectors, reference[0], reference[1], int(settings["knn_k"]))
        entries.append(entry)
        if pm.label == "final":
            final_states, final_types = states, type_vectors
            if settings["save_states"]:
                with atomic.atomic_file(subject.out_path.with_suffix(".states.npz"), "wb") as f:
                    np.savez(f, ids=sample.ids, **{name: h.astype(np.float16) for name, h in states.items()})
    record = {
        "schema": PROBES_SCHEMA,
        "subject": dict(subject_summary(subject)),
        "settings": probe_settings(settings),
        "sample": sample_summary(sample),
        "code": {"probing_sha": code_sha(), **versions()},
        "seconds": round(time.perf_counter() - started, 2),
        "models": entries,
    }
    atomic.write_json(subject.out_path, record)
    final = entries[-1]
    acc = final["identity"].get("offset0")
    say(f"[probe] {subject.name}: {len(entries)} model(s) in {record['seconds']:.1f}s"
        + (f"; token identity at {final['layers'][1]}: {acc[1]['accuracy']:.3f}" if acc and len(acc) > 1 else "")
        + f" -> {subject.out_path}")
    return record, final_states, final_types


def sample_summary(sample: Sample) -> dict[str, Any]:
    n_rows = len(sample.ids)
    return {"windows": int(len(sample.windows)), "seq_len": int(sample.windows.shape[1]), "first_position": sample.first,
            "train_windows": sample.n_train_windows, "rows": n_rows, "train_rows": int(sample.train.sum()),
            "classes": int(len(sample.classes)), "type_vectors": int(len(sample.types)),
            "type_min_count_seen": int(sample.type_counts.min()) if len(sample.type_counts) else None,
            "class_coverage": float(np.isin(sample.ids, sample.classes).mean()),
            "windows_sha": hashlib.sha256(sample.windows.tobytes()).hexdigest()}


def cross_record(subjects: Sequence[ProbeSubject], states: Mapping[str, Mapping[str, np.ndarray]],
                 tv: Mapping[str, Mapping[str, np.ndarray]], sample: Sample,
                 settings: Mapping[str, Any]) -> dict[str, Any]:
    """Every pair of final models: layer x layer linear CKA on the same tokens, and per layer the
    similarity of their type vectors (tv: per job, per layer, from measure_model). Pairs of one
    input at different seeds are the noise floor."""
    k = int(settings["knn_k"])
    centered = {s.name: measures.CenteredLayers(list(states[s.name].values())) for s in subjects}
    pairs = []
    for i, a in enumerate(subjects):
        for b in subjects[i + 1:]:
            la, lb = list(states[a.name]), list(states[b.name])
            pairs.append({
                "a": a.name, "b": b.name, "a_input": a.input_type, "b_input": b.input_type,
                "a_seed": a.seed, "b_seed": b.seed, "a_layers": la, "b_layers": lb,
                "cka": measures.cka_matrix(centered[a.name], centered[b.name]).tolist(),
                "type_vectors": _per_layer([_similarity(tv[a.name][x], tv[b.name][x], k) for x in la if x in tv[b.name]]),
            })
    return {"schema": PROBES_SCHEMA, "settings": probe_settings(settings), "sample": sample_summary(sample),
            "code": {"probing_sha": code_sha(), **versions()},
            "subjects": [dict(subject_summary(s)) for s in subjects], "pairs": pairs}


def reference_table(subject: ProbeSubject | None, sample: Sample) -> tuple[np.ndarray, dict[str, Any]] | None:
    """A learned model's input table rows for the sample's types (None when there is no learned model)."""
    if subject is None:
        return None
    pm = final_model(subject)
    if not isinstance(pm.model.input, LearnedEmbedding):
        raise ConfigError("probe.reference", f"{subject.final_dir} has input {subject.input_type!r}, not a learned table",
                          "point probe.reference at a learned-input checkpoint")
    return input_table(pm.model, sample.types), {"name": subject.name, "seed": subject.seed,
                                                  "checkpoint": str(subject.final_dir), "weights_sha": pm.weights_sha}


def windows_for(subjects: Sequence[ProbeSubject], root: Path, settings: Mapping[str, Any]) -> np.ndarray:
    seq_len = int(settings["seq_len"] or min(s.seq_len for s in subjects))
    return heldout_windows(root, seq_len, int(settings["tokens"]))
