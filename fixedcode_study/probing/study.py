"""Probing a whole study: which models share a token sample, which learned job each is compared
with, and the cross-model file. `fixedcode probe` resolves the settings and calls `probe_study`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..evaluation.harness import find_prepared_root
from ..record import atomic
from ..record.jobdir import CROSS_FILE
from .run import cross_record, make_sample, probe_subject, reference_table, sample_summary, windows_for
from .states import ProbeSubject, find_subjects

__all__ = ["probe_study", "reference_for"]


def _settings(subject: ProbeSubject) -> dict[str, Any]:
    return (((subject.record or {}).get("fingerprint") or {}).get("settings")) or {}


def reference_for(subject: ProbeSubject, subjects: list[ProbeSubject]) -> ProbeSubject | None:
    """The learned-table job a model's type vectors are compared with: same seed, and when a study
    holds several (a tuning grid), the one whose other settings differ least from the subject's."""
    candidates = [s for s in subjects if s.input_type == "learned" and s.seed == subject.seed]
    mine = {k: v for k, v in _settings(subject).items() if not k.startswith("input.")}

    def distance(other: ProbeSubject) -> tuple[int, str]:
        theirs = _settings(other)
        return sum(theirs.get(k) != v for k, v in mine.items()), other.name

    return min(candidates, key=distance) if candidates else None


def probe_study(path: str, settings: dict[str, Any], say=print, subjects: list[ProbeSubject] | None = None
                ) -> list[dict[str, Any]]:
    """Probe every subject under `path` (or the given ones) with resolved probe settings: probes.json per
    job, probes_cross.json per corpus when several (the probe command's work)."""
    subjects = subjects or find_subjects(path)
    by_corpus: dict[str, list[ProbeSubject]] = defaultdict(list)
    for s in subjects:  # one token sample per corpus, so cross-model numbers compare the same tokens
        by_corpus[(s.config.get("data") or {}).get("cache_key") or s.name].append(s)
    explicit = find_subjects(settings["reference"])[0] if settings["reference"] else None
    records = []
    for corpus, group in by_corpus.items():
        root = find_prepared_root(group[0].final_dir, group[0].config, settings["prepared_root"], None,
                                  field="probe.prepared_root")
        try:
            sample = make_sample(windows_for(group, root, settings), settings)
        except ValueError as err:
            field, _, message = str(err).partition(": ")
            raise ConfigError(field, message, "change that probe setting") from None
        say(f"[probe] {len(group)} job(s) on {len(sample.ids):,} held-out tokens of {root.name} "
            f"(the {len(sample.classes)} probed classes cover {sample_summary(sample)['class_coverage']:.0%} of them)")
        tables: dict[Any, Any] = {}
        finals, final_types = {}, {}
        for subject in group:
            ref_subject = explicit or reference_for(subject, group)
            key = str(ref_subject.final_dir) if ref_subject else None
            if key not in tables:
                tables[key] = reference_table(ref_subject, sample)
            record, states, types = probe_subject(subject, sample, settings, tables[key], say=say)
            records.append(record)
            if settings["cross"] and len(group) > 1:
                finals[subject.name], final_types[subject.name] = states, types
        if finals:  # one file per corpus: models are only compared on the same tokens
            name = CROSS_FILE if len(by_corpus) == 1 else CROSS_FILE.replace(".json", f"-{corpus}.json")
            out = Path(path).expanduser().resolve() / name
            atomic.write_json(out, cross_record(group, finals, final_types, sample, settings))
            say(f"[probe] cross-model similarity of {len(group)} jobs -> {out}")
    return records
