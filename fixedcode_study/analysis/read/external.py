"""Outside models evaluated with `fixedcode evaluate hf=...` (external.json records).

They are references, like the paper's numbers: shown as marked rows of the downstream table (name
and revision in the label) and never part of a statistic. Each is read from its own record under a
study folder (<study>/external/<name@revision>/external.json). A record scored on other documents
or with other lm-eval settings than the trained runs beside it gets a note saying so, since its row
then measures something else.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .records import display_path, eval_rows
from ...record.jobdir import EXTERNAL_DIR, EXTERNAL_FILE

COLUMNS = ["label", "name", "revision", "params", "path", "metric", "value", "stderr", "headline"]
# lm-eval settings that must match the trained runs' for a row to measure the same thing.
MATCHED_SETTINGS = ("prepared_root", "limit", "num_fewshot", "data_dir", "builtin")


def label(external: dict) -> str:
    """'external · SmolLM2-135M @ <commit> (reference)'; a local folder by its name, not its whole path."""
    name = str(external.get("name"))
    if external.get("source") == "local":
        name = Path(name).name or name
    return f"external · {name} @ {str(external.get('revision'))[:19]} (reference)"


def external_files(roots: list[str | Path], skip: frozenset[Path] = frozenset()) -> list[Path]:
    """Every external record under the roots, once: roots may nest (`multirun multirun/main`), and a
    record found twice would be two rows of one reference (and two cells where the table expects one).
    `skip`: records an earlier read already has."""
    found = {p.resolve() for root in roots for p in Path(root).glob(f"**/{EXTERNAL_DIR}/*/{EXTERNAL_FILE}")}
    return sorted(found - skip)


def read_externals(roots: list[str | Path], notes: list[str],
                   skip: frozenset[Path] = frozenset()) -> tuple[pd.DataFrame, dict[str, dict], list[Path]]:
    """(long rows of every external record under the roots, {label: lm-eval settings}, the records
    looked at); records in `skip` were read before and are left out."""
    rows, settings = [], {}
    paths = external_files(roots, skip)
    for path in paths:
        try:
            record = json.loads(path.read_text())
            external = record["external"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            notes.append(f"{display_path(path)}: unreadable external record ({type(exc).__name__}); left out")
            continue
        name = label(external)
        settings[name] = record.get("settings") or {}
        for row in eval_rows({"eval": record}):
            rows.append({**row, "label": name, "name": external.get("name"), "revision": external.get("revision"),
                         "params": external.get("params"), "path": display_path(path.parent)})
    frame = pd.DataFrame(rows, columns=COLUMNS + ["kind"]) if rows else pd.DataFrame(columns=COLUMNS + ["kind"])
    return frame.drop(columns="kind"), settings, paths


def setting_notes(externals: dict[str, dict], run_settings: list[dict]) -> list[str]:
    """Say when an external row was scored under other lm-eval settings than the trained runs, and
    always when it was scored on a subset of each task (eval.limit): with no trained run evaluated
    there is nothing to compare it with, and a smoke test must still not read as a full-set score."""
    notes = []
    for name, theirs in externals.items():
        if theirs.get("limit") is not None:
            notes.append(f"{name} was scored on at most {theirs['limit']} examples per task (eval.limit), "
                         "not on the full tasks: a smoke test, not comparable with full-set scores")
        differing = [k for k in MATCHED_SETTINGS
                     if any(json.dumps(s.get(k), sort_keys=True) != json.dumps(theirs.get(k), sort_keys=True)
                            for s in run_settings)]
        if run_settings and differing:
            notes.append(f"{name} was evaluated with other lm-eval settings than the trained runs "
                         f"({', '.join(differing)}), so its row is not directly comparable")
    return notes
