"""Representation-probe tables (fixedcode_study.analysis.read.probes; measures defined in fixedcode_study/probing/__init__.py).

- ``probes_identity``: per variant and layer, token-identity probe accuracy at each offset on the final
  models (mean ± sample sd over seeds), the same probe on the init models (the random-feature baseline)
  and the majority-class baseline.
- ``probes_geometry``: per variant and layer, code-bit probe accuracy (binary codes), effective rank,
  anisotropy and the RSA of the layer's type vectors with the learned input table of the same seed.
- ``probes_cka``: per pair kind (two inputs at one seed; one input at two seeds = the noise floor), the
  linear CKA of layer i of one model with layer i of the other, mean ± sd over pairs.
Every CSV row carries the run directories (``runs``) its numbers come from.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..stats.grouping import context_columns, model_rank, shown_context, sort_rows
from ..read.probes import CROSS_INPUT, FINAL, INIT, ProbeData
from .render import Table

MISSING = "—"
OFFSET = re.compile(r"^identity_offset(\d+)$")
# measure -> (column title, decimals)
GEOMETRY = [("bits_mean", "code-bit accuracy", 3), ("effective_rank", "effective rank", 1),
            ("anisotropy", "anisotropy", 3), ("vs_reference_rsa", "RSA vs learned table", 3)]
ACCURACY_DECIMALS = 3
CKA_DECIMALS = 3


def summarize_values(values: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """n, mean, sample sd, min, max and run paths per group and measure."""
    values = values[np.isfinite(values["value"].astype(float))]
    grouped = values.groupby(by + ["measure"], sort=False, dropna=False)
    out = grouped["value"].agg(n="count", mean="mean", std="std", min="min", max="max").reset_index()
    out["runs"] = grouped["run"].agg(lambda r: ";".join(sorted(set(r)))).reset_index(drop=True)
    return out


def offsets(values: pd.DataFrame) -> list[int]:
    found = {int(m.group(1)) for m in map(OFFSET.match, values["measure"].unique()) if m}
    return sorted(found)


def _spread(hit: dict, decimals: int, row_n: int) -> str:
    if hit is None:
        return MISSING
    text = f"{hit['mean']:.{decimals}f}"
    if hit["n"] >= 2:
        text += f" ± {hit['std']:.{decimals}f}"
    return text + (f" (n={hit['n']})" if hit["n"] != row_n else "")


def _mean(hit: dict | None, decimals: int) -> str:
    return MISSING if hit is None else f"{hit['mean']:.{decimals}f}"


def _majority(hits: list[dict | None]) -> str:
    shown = [MISSING if h is None else f"{h['mean']:.{ACCURACY_DECIMALS}f}" for h in hits]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)


class _Layers:
    """Final- and init-model summaries per (context, variant, layer), and the row order."""

    def __init__(self, study, probes: ProbeData):
        self.context = context_columns(study.jobs)
        self.keys = self.context + ["variant", "variant_order", "layer_index", "layer"]
        values = probes.values
        self.summary = summarize_values(values[values["label"].isin([FINAL, INIT])], self.keys + ["label"])
        self.lookup = {tuple(r[k] for k in self.keys if k != "variant_order") + (r["label"], r["measure"]): r
                       for r in self.summary.to_dict("records")}
        finals = values[values["label"] == FINAL]
        self.row_n = finals.groupby(self.keys, dropna=False)["run"].nunique()
        self.rows = sort_rows(finals[self.keys].drop_duplicates(), study.jobs, ["layer_index"])
        self.shown = shown_context(study.jobs)

    def hit(self, key: dict, label: str, measure: str) -> dict | None:
        return self.lookup.get(tuple(key[k] for k in self.keys if k != "variant_order") + (label, measure))

    def n(self, key: dict) -> int:
        return int(self.row_n.loc[tuple(key[k] for k in self.keys)])

    def head(self, key: dict) -> list[str]:
        return [str(key[c]) for c in self.shown] + [key["variant"], key["layer"], str(self.n(key))]

    def data(self, measures: list[str]) -> pd.DataFrame:
        data = self.summary[self.summary["measure"].isin(measures)]
        return data.sort_values(self.keys[:-2] + ["layer_index", "label", "measure"], kind="stable").drop(
            columns="variant_order").rename(columns={"label": "model_state"})


def _sample_text(probes: ProbeData) -> str:
    samples = [s for s, _ in probes.samples()]
    classes = sorted({s.get("classes") for s in samples if s.get("classes") is not None})
    coverage = [s.get("class_coverage") for s in samples if isinstance(s.get("class_coverage"), (int, float))]
    cover = (f", which cover {min(coverage):.0%}" + (f"–{max(coverage):.0%}" if max(coverage) - min(coverage) >= 0.005
                                                     else "") + " of the probed tokens") if coverage else ""
    return f"the {'/'.join(map(str, classes)) or '?'} most frequent token types{cover}"


def identity_table(study, probes: ProbeData) -> Table | None:
    layers = _Layers(study, probes)
    offs = offsets(probes.values)
    if not offs or layers.rows.empty:
        return None
    columns = layers.shown + ["input variant", "layer", "n"] + [f"offset {k}" for k in offs] \
        + [f"init {k}" for k in offs] + ["majority" + (f" ({'/'.join(map(str, offs))})" if len(offs) > 1 else "")]
    rows = []
    for key in layers.rows.to_dict("records"):
        n = layers.n(key)
        rows.append(layers.head(key)
                    + [_spread(layers.hit(key, FINAL, f"identity_offset{k}"), ACCURACY_DECIMALS, n) for k in offs]
                    + [_mean(layers.hit(key, INIT, f"identity_offset{k}"), ACCURACY_DECIMALS) for k in offs]
                    + [_majority([layers.hit(key, FINAL, f"identity_offset{k}_majority") for k in offs])])
    method = sorted({str((r.get("settings") or {}).get("method")) for r in probes.records.values()})
    caption = ("Token identity per layer: held-out accuracy of a linear probe (" + "/".join(method) + ") that reads "
               "the token at offset k before each position (0 = the current token) from the layer's hidden state, "
               f"over {_sample_text(probes)}. offset k: final models, mean ± sample sd over seeds (n jobs per row; "
               "a cell with fewer says so); init k: the same probe on each job's initial model before training "
               "(random features, mean over seeds); majority: accuracy of always predicting the most frequent class "
               "(per offset when they differ). Layers: input (what block 1 receives), blockN (residual stream after "
               "block N), final_norm (what the head reads).")
    measures = [f"identity_offset{k}{s}" for k in offs for s in ("", "_majority", "_ci_low", "_ci_high", "_coverage")]
    numeric = set(range(len(layers.shown) + 2, len(columns)))
    return Table("probes_identity", caption, columns, rows, layers.data(measures), set(), numeric)


def geometry_table(study, probes: ProbeData) -> Table | None:
    layers = _Layers(study, probes)
    present = [(m, title, d) for m, title, d in GEOMETRY if (probes.values["measure"] == m).any()]
    if not present or layers.rows.empty:
        return None
    columns = layers.shown + ["input variant", "layer", "n"] + [title for _, title, _ in present]
    rows = []
    for key in layers.rows.to_dict("records"):
        n = layers.n(key)
        rows.append(layers.head(key) + [_spread(layers.hit(key, FINAL, m), d, n) for m, _, d in present])
    parts = {"bits_mean": "code-bit accuracy: mean held-out accuracy of one linear probe per non-constant bit of the "
                          f"model's own binary code ({MISSING} for inputs without one)",
             "effective_rank": "effective rank: exp of the entropy of the normalised singular values of the centred "
                               "hidden states (Roy & Vetterli 2007)",
             "anisotropy": "anisotropy: mean cosine between random pairs of hidden states (Ethayarajh 2019)",
             "vs_reference_rsa": "RSA vs learned table: Spearman correlation between the pairwise cosines of the "
                                 "layer's type vectors (context-averaged hidden state per frequent type) and those of "
                                 "the same types' rows in the input table of the learned model of the same seed (for "
                                 "learned runs: their own table)"}
    caption = ("Geometry per layer, final models, mean ± sample sd over seeds (n jobs per row). "
               + "; ".join(parts[m] for m, _, _ in present) + ".")
    numeric = set(range(len(layers.shown) + 2, len(columns)))
    data = layers.data([m for m, _, _ in present])
    return Table("probes_geometry", caption, columns, rows, data[data["model_state"] == FINAL], set(), numeric)


def kind_order(pairs: pd.DataFrame) -> list[tuple]:
    """(context..., kind, category) in reading order: different inputs first, then the noise floors."""
    kinds = pairs.dropna(subset=["kind"])
    firsts = kinds.drop_duplicates("kind")
    return [(r["kind"], r["category"]) for r in sorted(
        firsts.to_dict("records"),
        key=lambda r: (r["category"] != CROSS_INPUT, r["a_variant_order"], r["b_variant_order"]))]


def with_orders(pairs: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    order = jobs.drop_duplicates("run").set_index("run")["variant_order"]
    return pairs.assign(a_variant_order=pairs["a_run"].map(order), b_variant_order=pairs["b_run"].map(order))


def diagonal_cka(study, probes: ProbeData) -> pd.DataFrame:
    """Per context, kind and layer: CKA of layer i with layer i over the kind's pairs."""
    pairs = probes.pairs
    pairs = pairs[pairs["kind"].notna() & (pairs["measure"] == "cka")
                  & (pairs["a_layer_index"] == pairs["b_layer_index"])]
    if pairs.empty:
        return pd.DataFrame()
    context = context_columns(study.jobs)
    by = context + ["kind", "category", "a_layer_index", "a_layer"]
    pairs = pairs.assign(pair=pairs["a_run"] + " | " + pairs["b_run"],
                         seeds=[f"{a}" if c == CROSS_INPUT else f"{a}–{b}"
                                for a, b, c in zip(pairs["a_seed"], pairs["b_seed"], pairs["category"], strict=True)])
    grouped = pairs.groupby(by, sort=False, dropna=False)
    out = grouped["value"].agg(n="count", mean="mean", std="std", min="min", max="max").reset_index()
    out["seeds"] = grouped["seeds"].agg(lambda s: ", ".join(sorted(set(s)))).reset_index(drop=True)
    out["runs"] = grouped["pair"].agg(lambda p: ";".join(sorted(set(p)))).reset_index(drop=True)
    out["cross_file"] = grouped["cross_file"].agg(lambda f: ";".join(sorted(set(f)))).reset_index(drop=True)
    return out.rename(columns={"a_layer_index": "layer_index", "a_layer": "layer"})


def layer_columns(frame: pd.DataFrame) -> list[str]:
    """Layer names in model order (input first, final_norm last) over models of any depth."""
    names = frame.drop_duplicates("layer")[["layer", "layer_index"]].to_dict("records")
    return [r["layer"] for r in sorted(names, key=lambda r: (r["layer"] == "final_norm", r["layer_index"]))]


def cka_table(study, probes: ProbeData) -> Table | None:
    diag = diagonal_cka(study, probes)
    if diag.empty:
        return None
    context = context_columns(study.jobs)
    shown = shown_context(study.jobs)
    layers = layer_columns(diag)
    pairs = with_orders(probes.pairs, study.jobs)
    order = {kind: i for i, (kind, _) in enumerate(kind_order(pairs))}
    rank = model_rank(study.jobs)  # contexts as every other table orders them: data, then model size
    diag = (diag.assign(_kind=diag["kind"].map(order), _model=diag["model"].map(rank))
            .sort_values([*(c if c != "model" else "_model" for c in context), "_kind", "layer_index"], kind="stable"))
    columns = shown + ["pair", "seeds", "n pairs"] + layers
    rows = []
    for key, part in diag.groupby(context + ["kind"], sort=False, dropna=False):
        key = dict(zip(context + ["kind"], key if isinstance(key, tuple) else (key,), strict=True))
        n = int(part["n"].max())
        hits = {r["layer"]: r for r in part.to_dict("records")}
        rows.append([str(key[c]) for c in shown] + [key["kind"], part["seeds"].iloc[0], str(n)]
                    + [_spread(hits.get(layer), CKA_DECIMALS, n) for layer in layers])
    caption = ("Cross-model similarity per layer: linear CKA (Kornblith et al. 2019) between layer i of one final "
               "model and layer i of another, on the same held-out tokens; mean ± sample sd over the pairs of each "
               "kind. \"a vs b\": two inputs at the same seed; \"a vs a (across seeds)\": one input at two seeds, "
               "the noise floor the cross-input numbers are read against. 1 = the same "
               "representation up to rotation and isotropic scale. Every layer pair: figure probe_cka and the CSV.")
    numeric = set(range(len(shown) + 2, len(columns)))
    data = diag.drop(columns=["_kind", "_model"])
    return Table("probes_cka", caption, columns, rows, data, set(), numeric)


def probe_tables(study, probes: ProbeData) -> dict[str, Table]:
    if probes.empty and probes.pairs.empty:
        return {}
    made = {}
    if not probes.empty:
        for name, build in (("probes_identity", identity_table), ("probes_geometry", geometry_table)):
            table = build(study, probes)
            if table is not None:
                made[name] = table
    cka = cka_table(study, probes)
    if cka is not None:
        made["probes_cka"] = cka
    return made
