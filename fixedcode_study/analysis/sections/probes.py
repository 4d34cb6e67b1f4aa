"""The representation probes: what was measured on which tokens, against which baselines, whether
each probes.json is fresh, the per-layer tables and the probe figures (read/probes.py data)."""

from __future__ import annotations

from pathlib import Path

from ..figures.probes import probe_figures
from ..read.probes import RERUN
from ..tables.probes import probe_tables
from .base import Part, embed, table_block

TITLE = "Representation probes"
TITLES = {"probes_identity": "Token identity per layer", "probes_geometry": "Geometry per layer",
          "probes_cka": "Cross-model similarity per layer"}
TABLES = tuple(TITLES)
FIGURES = ("probe_layers", "probe_cka", "probe_training")


def build(results, figures_dir: Path) -> Part:
    """Method lines, tables and figures of the representation probes; nothing when no included job has
    fresh probes."""
    probes = results.probes
    if probes is None or (probes.empty and probes.pairs.empty):
        return Part()
    study = results.probe_study
    part = Part(tables=probe_tables(study, probes))
    for figure in probe_figures(study, probes, figures_dir):
        part.add(figure)
    samples = probes.samples()
    settings = next(iter(probes.records.values()), {}).get("settings") or {}
    lines = ["## Representation probes", "",
             "- **What.** `fixedcode probe` reads every layer's hidden states (input = what block 1 "
             "receives, blockN = residual stream after block N, final_norm = what the head reads) and measures "
             "token identity and code bits with linear probes"
             + (f" ({settings['method']})" if settings.get("method") else "")
             + ", effective rank and anisotropy, type vectors (context-averaged state per token type) against the "
             "learned input table, and linear CKA between models; definitions and references in "
             "`fixedcode_study/probing/__init__.py`.",
             "- **Tokens.** " + " ".join(_sample_line(s, runs, len(samples) > 1) for s, runs in samples),
             "- **Baselines.** Each probe is read against the same probe on the job's initial model (same seed and "
             "input, before training: random features) and against the majority class of the test rows; cross-input "
             "CKA is read against two seeds of one input.",
             *probe_only_lines(results.probe_only),
             f"- **Freshness.** Probes of {len(probes.records)} included job(s) are used"
             + (f", and cross-model pairs from {', '.join(f'`{f}`' for f in probes.cross_files)}"
                if probes.cross_files else "")
             + ". A job's probes.json counts only when its job fingerprint and finish time equal the job's "
             "results.json (it measured the weights the other tables come from), a pair only when both jobs count; "
             f"anything else is listed under caveats ({RERUN} to refresh).",
             ""]
    for name, title in TITLES.items():
        if name in part.tables:
            lines += table_block(title, part.tables[name], level="###")
    lines += [line for figure in part.figures for line in embed(figure)]
    part.lines = lines
    return part


def probe_only_lines(arms: dict[str, int]) -> list[str]:
    if not arms:
        return []
    listed = ", ".join(f"{v} ({n} job{'s' if n != 1 else ''})" for v, n in arms.items())
    return [f"- **Probe-only arms.** {listed}: trained to be probed beside the study's arms (`probe_runs=`); "
            "they appear in these probe tables and figures only, never in a comparison, its Holm family or the "
            "tables above. Their jobs are in tables/jobs.csv (probe_only = true)."]


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _sample_line(sample: dict, runs: list[str], several: bool) -> str:
    seq = f" of {sample['seq_len']} tokens" if sample.get("seq_len") else ""
    coverage = sample.get("class_coverage")
    text = (f"{_count(sample.get('rows'))} held-out positions ({sample.get('windows', '?')} windows{seq} from the "
            f"start of the validation split, positions from {sample.get('first_position', '?')} on); the probes are "
            f"fitted on the first {sample.get('train_windows', '?')} windows ({_count(sample.get('train_rows'))} rows) "
            f"and tested on the rest. Identity probes predict the {sample.get('classes', '?')} most frequent token "
            "types" + (f", which cover {coverage:.1%} of the positions (the others are left out of them)"
                       if isinstance(coverage, (int, float)) else "")
            + f"; type vectors for {sample.get('type_vectors', '?')} types")
    return text + (f" (jobs: {len(runs)}, sample {str(sample.get('windows_sha'))[:12]})" if several else "") + "."
