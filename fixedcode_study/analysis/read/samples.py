"""Generated text of the included jobs (`fixedcode generate checkpoint=<study>`),
for a look at what each variant learned: <job>/samples.json, shown per variant in report.md.

Text is never a number in a table, but the same trust rule as the probes holds: a samples.json is
shown only while its job fingerprint and finish time equal results.json's (read/probes.py
`staleness`), so a retrained job never shows the old model's text. Per variant, the job with the
lowest seed is shown (one model, not a pick of the best-looking samples).
"""

from __future__ import annotations

import json
from pathlib import Path

from .probes import job_identity, staleness
from ...record.jobdir import SAMPLES_FILE

SHOWN_PER_PROMPT = 2
RERUN = "re-run fixedcode generate"


def load_samples(study) -> tuple[list[tuple[str, object, dict]], list[str]]:
    """([(variant, seed, samples.json)] in variant order, notes about stale or unreadable files)."""
    shown, notes = [], []
    jobs = study.included_jobs.sort_values(["variant_order", "seed"] if "variant_order" in study.jobs else ["seed"])
    identity = job_identity(jobs)
    for variant, group in jobs.groupby("variant", sort=False):
        for row in group.itertuples():
            path = Path(row.run) / SAMPLES_FILE
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text())
                why = staleness(data.get("subject") or {}, identity[row.run])
            except (OSError, ValueError, AttributeError) as exc:
                notes.append(f"{row.run}: {SAMPLES_FILE} unreadable ({type(exc).__name__}); left out")
                continue
            if why:
                notes.append(f"{row.run}: {SAMPLES_FILE} left out: {why} ({RERUN})")
                continue
            shown.append((variant, row.seed, data))
            break  # the lowest seed with fresh samples
    return shown, notes
