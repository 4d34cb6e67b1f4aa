"""`python -m fixedcode_study.probe checkpoint=PATH [probe.*=...]`: representation probes.

    python -m fixedcode_study.probe checkpoint=outputs/multirun/main                # a whole study
    python -m fixedcode_study.probe checkpoint=outputs/multirun/main/input=gf2,seed=1  # one job
    python -m fixedcode_study.probe checkpoint=DIR/checkpoints/final probe.tokens=4096 probe.init=false
    python -m fixedcode_study.probe hf=exports/gf2-s1 study=outputs/multirun/main   # an outside model

PATH is a final checkpoint folder, a job directory or a study directory (every completed job below
it). Each job gets probes.json beside its results.json (its init, its step-*.ckpt snapshots and its
final model); a study also gets probes_cross.json (layer-by-layer CKA between every pair of final
models). Settings: conf/probe/default.yaml; measures: fixedcode_study/probing/__init__.py.
Then `python -m analysis PATH` renders them with the rest of the report.

hf= probes a Hugging Face Llama-family folder or Hub name instead (hub/external.py: its final
weights only, on the default corpus's held-out documents in its own tokenization); its probes.json
goes to <study>/external/<name@revision>/ (study= defaults to ${out_root}/multirun/main).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from . import args as cliargs
from ..config import compose
from ..errors import ConfigError
from ..evaluation.harness import find_prepared_root
from ..probing.run import (CROSS_FILE, cross_record, make_sample, probe_subject, reference_table,
                          sample_summary, windows_for)
from ..probing.linear import METHODS
from ..probing.states import ProbeSubject, find_subjects
from ..record import atomic


def probe_settings(overrides: list[str]) -> dict[str, Any]:
    bad = [o for o in overrides if not o.startswith(("probe.", "probe="))]
    if bad:
        raise ConfigError(bad[0].split("=")[0], "is not a probe setting", "pass checkpoint=PATH and probe.<key>=<value>")
    cfg = compose(["+probe=default", *(o.replace("probe=", "+probe=", 1) if o.startswith("probe=") else o
                                       for o in overrides if not o.startswith("probe=default"))])
    settings = OmegaConf.to_container(cfg.probe, resolve=True)
    if settings["method"] not in METHODS:  # checked before any model is loaded
        raise ConfigError("probe.method", f"{settings['method']!r} is not a probe", f"use one of {', '.join(METHODS)}")
    return settings


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


def run(path: str, settings: dict[str, Any], say=print, subjects: list[ProbeSubject] | None = None
        ) -> list[dict[str, Any]]:
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


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print(__doc__)
        return
    started = time.perf_counter()
    try:
        own = cliargs.take(args, ("checkpoint", "hf", "study"))
        if (own["checkpoint"] is None) == (own["hf"] is None):
            raise ConfigError("checkpoint", "missing" if own["checkpoint"] is None else "given twice",
                              "pass checkpoint=<a checkpoint folder, a job directory or a study directory> "
                              "or hf=<a Hugging Face folder or Hub name>")
        if own["study"] is not None and own["hf"] is None:
            raise ConfigError("study", "applies to hf= models only", "drop study= or use hf=")
        settings = probe_settings([a for a in args if a.split("=", 1)[0] not in own])
        if own["hf"]:
            from ..hub.external import default_study, external_subject

            subject = external_subject(own["hf"], own["study"] or default_study())
            settings.update(init=False, snapshots=False)  # an outside model has no init stream or snapshots here
            records = run(str(subject.out_dir), settings, subjects=[subject])
        else:
            records = run(own["checkpoint"], settings)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(f"[probe] {len(records)} job(s) probed in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
