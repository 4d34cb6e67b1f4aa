"""One composition: two checkpoints and the settings -> the compose.json record (the `compose` command's work).

    record = compose_pair(folder_a, folder_b, ComposeSettings(stitch_tokens=65536))
    atomic.write_json(out, record)

The record (COMPOSE_SCHEMA):
  a, b        each member: checkpoint, job, fingerprint, sweep, seed, model/input/output names,
              weights_sha256, its job's own results.json `final` (job_final), and the spec it trained under
  members     each member's validation here ({val_loss, val_ppl, val_bpb, val_tokens, val_loss_select,
              val_loss_report}), which equals job_final's on CPU for an uncompiled job (validation.py)
  held_out    what every loss was computed over (cache key, seq_len, batch size, precision, threads)
  settings    the settings (settings.py), the seed among them
  ensemble    ensemble.py's record;  stitch  stitch.py's;  barrier  barrier.py's (each only when asked)
  runtime     torch version and the determinism statement; seconds (the one field that is not a
              function of the inputs)
Deterministic: on CPU the same pair, settings and thread count give the same record bit for bit
(timing aside): validation is a fixed-order float64 sum, the stitch's batches are seeded and its
init is the identity.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from .barrier import barrier_record
from .ensemble import ensemble_record
from .pair import load_pair
from .settings import ComposeSettings
from .stitch import stitch_record
from .validation import HeldOut, validate

COMPOSE_SCHEMA = 1
DETERMINISM = ("bitwise on CPU for the same pair, settings and thread count (timing aside); "
               "to float tolerance on a GPU or at another thread count")


def compose_pair(folder_a: str | os.PathLike, folder_b: str | os.PathLike, settings: ComposeSettings,
                 say=print) -> dict[str, Any]:
    """Load and check the pair, then run the measures the settings ask for (module docstring)."""
    started = time.perf_counter()
    measures = settings.measure_names
    pair = load_pair(folder_a, folder_b, measures)
    held_out = HeldOut.of(pair, settings)
    torch.manual_seed(settings.seed)  # nothing below should draw from the global generator; if a library does, seeded
    own = {m.role: validate(m.model, held_out) for m in pair.members}
    say(f"[compose] a {own['a']['val_loss']:.4f}, b {own['b']['val_loss']:.4f} val loss on "
        f"{int(own['a']['val_tokens']):,} held-out tokens")
    record: dict[str, Any] = {"schema": COMPOSE_SCHEMA, "a": pair.a.record(), "b": pair.b.record(), "members": own,
                              "held_out": held_out.record(), "settings": settings.record()}
    if "ensemble" in measures:
        record["ensemble"] = ensemble_record(pair, held_out, own)
        say(f"[compose] ensemble (mean logits) {record['ensemble']['logits']['val_loss']:.4f}")
    if "stitch" in measures:
        record["stitch"] = stitch_record(pair, held_out, settings, own)
        say(f"[compose] stitched at k = 0..{pair.a.model.config.n_layer}")
    if "barrier" in measures:
        record["barrier"] = barrier_record(pair, held_out, own)
        say(f"[compose] barrier {record['barrier']['barrier']:.4f} at alpha {record['barrier']['at_alpha']}")
    record["runtime"] = {"torch": torch.__version__, "deterministic": DETERMINISM}
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record


def summary(record: dict[str, Any]) -> list[str]:
    """The command's closing lines: every measure's headline numbers."""
    own = record["members"]
    a, b = own["a"], own["b"]
    lines = [f"members: a {a['val_loss']:.4f} (bpb {a['val_bpb']:.4f}), b {b['val_loss']:.4f} (bpb {b['val_bpb']:.4f})"]
    if "ensemble" in record:
        e = record["ensemble"]
        logits, mixture = e["logits"], e["probabilities"]
        lines.append(f"ensemble: mean logits {logits['val_loss']:.4f}, gain over the better member "
                     f"({e['better_member']}) {logits['gain_over_better']:+.4f} nats; probability mixture "
                     f"{mixture['val_loss']:.4f} ({mixture['gain_over_better']:+.4f})")
    for kind in ("identity", "affine"):
        rows = (record.get("stitch") or {}).get(kind)
        if rows:
            lines.append(f"stitch a -> b, {kind}: " + ", ".join(f"k={r['k']} {r['val_loss']:.4f}" for r in rows))
    if "barrier" in record:
        line = record["barrier"]
        lines.append(f"barrier (no alignment, {line['points']} points): {line['barrier']:.4f} nats at alpha "
                     f"{line['at_alpha']}")
    return lines
