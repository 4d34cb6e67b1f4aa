"""Reference numbers that were not produced here (analysis/reference_results.csv).

Two uses, neither of which ever enters a statistic:
- the paper's own results and chance levels, matched to our lm-eval columns by ``lm_eval_metric``
  and shown as marked reference rows in the downstream table and figure;
- the whole file as the published-reference table (``reference=true``).
Values are kept as published (percent); ``unit: percent`` is divided by 100 to match lm-eval's
fractions. ``approx: yes`` marks approximate values; "25-26" is a range and shown as ≈0.25–0.26.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from .render import Table

REFERENCE_CSV = Path(__file__).with_name("reference_results.csv")
PUBLISHED = "published, not produced here"
PAPER, CHANCE = "paper", "chance"


def read_references(path: Path = REFERENCE_CSV) -> pd.DataFrame:
    # Leading '#' lines are provenance notes; not comment="#", which would cut URLs with fragments.
    lines = [ln for ln in Path(path).read_text().splitlines() if not ln.startswith("#")]
    refs = pd.read_csv(io.StringIO("\n".join(lines)), dtype=str, keep_default_na=False)
    bounds = refs["value"].map(parse_value)
    refs["low"] = [b[0] for b in bounds]
    refs["high"] = [b[1] for b in bounds]
    refs["approx"] = refs.get("approx", "").astype(str).str.lower().isin(["yes", "true", "1"])
    return refs


def parse_value(text: str) -> tuple[float, float]:
    """'57.79' -> (57.79, 57.79); '25-26' -> (25, 26); 'n/a' or '' -> (nan, nan)."""
    text = str(text).strip().replace("–", "-")
    parts = text.split("-") if text.count("-") == 1 and not text.startswith("-") else [text]
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        return math.nan, math.nan
    return min(numbers), max(numbers)


def _decimals(text: str) -> int:
    number = str(text).strip().split("-")[0]
    return len(number.partition(".")[2])


def eval_references(metrics: list[str], path: Path = REFERENCE_CSV) -> pd.DataFrame:
    """Paper and chance rows for the given lm-eval metrics, in lm-eval units. Columns: source, label,
    variant, metric, low, high, mid, approx, cell (display text), note."""
    refs = read_references(path)
    refs = refs[refs["source"].isin([PAPER, CHANCE]) & refs["lm_eval_metric"].isin(metrics)].copy()
    if refs.empty:
        return refs
    percent = refs["unit"].eq("percent")
    factor = percent.map({True: 0.01, False: 1.0})
    refs["low"], refs["high"] = refs["low"] * factor, refs["high"] * factor
    refs["mid"] = (refs["low"] + refs["high"]) / 2
    refs["metric"] = refs["lm_eval_metric"]
    refs["label"] = [f"paper · {v} (reference)" if s == PAPER else "chance (reference)"
                     for s, v in zip(refs["source"], refs["variant"], strict=True)]
    refs["cell"] = [_cell(r) for r in refs.itertuples()]
    return refs[["source", "label", "variant", "model", "metric", "low", "high", "mid", "approx", "cell", "note"]]


def _cell(r) -> str:
    if math.isnan(r.low):
        return "n/a"
    dd = _decimals(r.value) + (2 if r.unit == "percent" else 0)
    text = f"{r.low:.{dd}f}" if r.low == r.high else f"{r.low:.{dd}f}–{r.high:.{dd}f}"
    return ("≈" if r.approx else "") + text


def reference_table(path: Path = REFERENCE_CSV) -> Table:
    refs = read_references(path).drop(columns=["low", "high"])
    refs["approx"] = refs["approx"].map({True: "yes", False: ""})
    refs.insert(0, "provenance", PUBLISHED)
    columns = ["provenance", "source", "model", "variant", "metric", "value", "approx", "citation", "note"]
    rows = [[str(r[c]) for c in columns] for r in refs.to_dict("records")]
    caption = ("Reference numbers (published, not produced here): copied from the cited sources, evaluated with "
               "their own harness, data and scale, so not directly comparable to the rows above, and never used in "
               "any statistic. Values as published (percent for accuracies); approx = the source gives no exact value.")
    return Table("reference", caption, columns, rows, refs, set(), {5})
