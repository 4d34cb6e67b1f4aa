"""The final validation loss per bucket (results.json `val_breakdown`, training/breakdown.py) as rows.

One row per (run, breakdown, bucket): the breakdown's `definition`; the bucket's edges as recorded
(`lower`, `upper`, `label`, and `edges`: the whole breakdown's buckets as JSON text, so two runs
compare a bucket only when their buckets are the same); its sums (`nats`, `tokens`, `bytes`); and
the whole validation's (`total_tokens`, `total_nats`). A record without the block (a job trained
before it existed) gives no rows; the tables say how many included jobs that left out.
"""

from __future__ import annotations

import json

import pandas as pd

COLUMNS = ["run", "breakdown", "of", "kind", "definition", "bucket", "label", "lower", "upper", "edges",
           "nats", "tokens", "bytes", "total_nats", "total_tokens"]


def breakdown_rows(results: dict, run: str) -> list[dict]:
    block = results.get("val_breakdown")
    if not isinstance(block, dict) or not isinstance(block.get("breakdowns"), dict):
        return []
    total = block.get("total") or {}
    rows = []
    for name, b in block["breakdowns"].items():
        edges = json.dumps({"lower": b.get("lower"), "upper": b.get("upper"), "labels": b.get("labels")})
        for i, label in enumerate(b.get("labels") or []):
            rows.append({"run": run, "breakdown": name, "of": b.get("of"), "kind": b.get("kind"),
                         "definition": b.get("definition") or "", "bucket": i,
                         "label": str(label), "lower": b["lower"][i], "upper": b["upper"][i], "edges": edges,
                         "nats": float(b["nats"][i]), "tokens": float(b["tokens"][i]),
                         "bytes": float(b["bytes"][i]), "total_nats": float(total.get("nats", float("nan"))),
                         "total_tokens": float(total.get("tokens", float("nan")))})
    return rows


def breakdown_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)
