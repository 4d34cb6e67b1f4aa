"""Samples: text generated from each variant's final weights (read/samples.py), for a look only; no
number is derived from it."""

from __future__ import annotations

import json
from pathlib import Path

from ..read.samples import SHOWN_PER_PROMPT
from .base import Part

TITLE = "Samples"
TABLES: tuple[str, ...] = ()
FIGURES: tuple[str, ...] = ()


def build(results, figures_dir: Path) -> Part:
    shown = results.samples
    if not shown:
        return Part()
    lines = ["## Samples", "", "Text generated from each variant's final weights (the job with the lowest seed that has "
             "samples; seeded sampling, so the command reproduces it). Illustration only: no number here is "
             "derived from it.", ""]
    for variant, seed, data in shown:
        for entry in data.get("prompts") or []:
            s = entry.get("settings") or {}
            lines += [f"**{variant}** (seed {seed}), prompt {json.dumps(entry.get('prompt'))}, temperature "
                      f"{s.get('temperature')}, top-k {s.get('top_k')}, sampling seed {s.get('seed')}:", ""]
            for text in (entry.get("samples") or [])[:SHOWN_PER_PROMPT]:
                lines += ["```", f"{entry.get('prompt')}{text}".rstrip(), "```", ""]
    return Part(lines)
