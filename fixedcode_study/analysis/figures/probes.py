"""Representation-probe figures (fixedcode_study.analysis.read.probes; measures: fixedcode_study/probing/__init__.py).

1. probe_layers: small multiples over layers (input .. final_norm) of the final models, one line per
   variant (mean over seeds, band min–max over seeds): token identity at each offset (init models dashed,
   majority class dotted grey), code-bit accuracy, effective rank, anisotropy, type-vector RSA vs the
   learned table.
2. probe_cka: layer x layer linear CKA heatmaps between final models, mean over the pairs of each kind
   (two inputs at one seed; one input across seeds = the noise floor), one shared 0..1 colour scale.
3. probe_training: for jobs that kept step-* snapshots, RSA vs the learned table, identity at offset 1
   and effective rank against training tokens, one line per layer, one column per job.
Each returns None when there is nothing to draw.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import ticker

from .style import BAND_ALPHA, FigureFile, human_number, legend_outside, line_kwargs, new_figure, save
from .curves import context_title, ordered_contexts, variant_order, variant_styles
from ..stats.grouping import context_columns, context_mask
from ..read.probes import CROSS_INPUT, FINAL, INIT, ProbeData
from ..tables.probes import kind_order, offsets, with_orders

INIT_STYLE = {"linestyle": (0, (4, 2)), "linewidth": 1.1, "alpha": 0.85}
MAJORITY_STYLE = {"color": "#7f7f7f", "linestyle": (0, (1, 1)), "linewidth": 1.2}
INIT_LABEL = "init model (dashed, same colour)"
MAJORITY_LABEL = "majority class (dotted grey)"
BOUNDED = ("identity_", "bits_mean")    # accuracies: y from 0 to 1
MAX_ANNOTATED_LAYERS = 10               # heatmaps with more layers per side are not annotated
MAX_CKA_PANELS = 12
MAX_LAYER_TICKS = 9


def panel_specs(values: pd.DataFrame) -> list[tuple[str, str]]:
    specs = [(f"identity_offset{k}", f"token identity, offset {k}" + (" (current token)" if k == 0 else
                                                                       " (previous)" if k == 1 else ""))
             for k in offsets(values)]
    specs += [("bits_mean", "code-bit probe accuracy"), ("effective_rank", "effective rank"),
              ("anisotropy", "anisotropy (mean cosine)"), ("vs_reference_rsa", "type-vector RSA vs learned table")]
    present = set(values["measure"])
    return [(m, title) for m, title in specs if m in present]


def layer_axis(ax, names: list[str]) -> None:
    """x = layer index, labelled by name (every k-th name for deep models)."""
    step = max(1, -(-len(names) // MAX_LAYER_TICKS))
    ticks = list(range(0, len(names), step))
    if ticks[-1] != len(names) - 1:
        ticks.append(len(names) - 1)
    ax.set_xticks(ticks)
    ax.set_xticklabels([names[i] for i in ticks], rotation=40, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.3, len(names) - 0.7)


def _layer_names(part: pd.DataFrame) -> list[str]:
    return list(part.drop_duplicates("layer_index").sort_values("layer_index")["layer"])


def _per_layer(part: pd.DataFrame) -> pd.DataFrame:
    return part.groupby("layer_index")["value"].agg(["mean", "min", "max"])


def probe_layers_figure(study, probes: ProbeData, out_dir: Path) -> FigureFile | None:
    values = probes.values
    values = values[values["label"].isin([FINAL, INIT]) & np.isfinite(values["value"].astype(float))]
    finals = values[values["label"] == FINAL]
    specs = panel_specs(finals)
    if finals.empty or not specs:
        return None
    context = context_columns(study.jobs)
    contexts = [k for k in ordered_contexts(study) if context_mask(finals, context, k).any()]
    styles = variant_styles(study)
    order = variant_order(study)
    panels = [(key, measure, title) for key in contexts for measure, title in specs
              if (context_mask(finals, context, key) & (finals["measure"] == measure)).any()]
    majority_of = {m: f"{m}_majority" for m, _ in specs if m.startswith("identity_")} | {"bits_mean": "bits_majority"}
    ncols = min(4, len(specs))
    if len(contexts) == 1:
        fig, axes = new_figure(len(panels), panel_width=3.0, height=2.6, ncols_max=ncols)
    else:
        fig, axes = context_rows(panels, ncols)
    proxies_added = False
    for ax, (key, measure, title) in zip(axes, panels, strict=True):
        here = values[context_mask(values, context, key)]
        names = _layer_names(here)
        part = here[here["measure"] == measure]
        for variant in [v for v in order if v in set(part["variant"])]:
            style = styles[variant]
            final = _per_layer(part[(part["variant"] == variant) & (part["label"] == FINAL)])
            if final.empty:
                continue
            ax.plot(final.index, final["mean"], label=variant, **line_kwargs(style))
            if part.loc[(part["variant"] == variant) & (part["label"] == FINAL), "run"].nunique() > 1:
                ax.fill_between(final.index, final["min"], final["max"], color=style["color"], alpha=BAND_ALPHA,
                                linewidth=0)
            init = _per_layer(part[(part["variant"] == variant) & (part["label"] == INIT)])
            if measure.startswith("identity_") and not init.empty:
                ax.plot(init.index, init["mean"], color=style["color"], **INIT_STYLE)
        if measure in majority_of:
            majority = _per_layer(here[(here["measure"] == majority_of[measure]) & (here["label"] == FINAL)])
            if not majority.empty:
                ax.plot(majority.index, majority["mean"], **MAJORITY_STYLE)
        if measure.startswith("identity_"):
            if not proxies_added:
                ax.plot([], [], color="#333333", label=INIT_LABEL, **INIT_STYLE)
                ax.plot([], [], label=MAJORITY_LABEL, **MAJORITY_STYLE)
                proxies_added = True
        if measure.startswith(BOUNDED):  # accuracies: from 0, and up to 1 where the data come near it
            ax.set_ylim(0.0, 1.02 if ax.get_ylim()[1] > 0.75 else None)
        layer_axis(ax, names)
        ax.set_title(title + (f"\n{context_title(context, key)}" if len(contexts) > 1 else ""))
    legend_outside(fig, axes)
    counts = finals.groupby("variant")["run"].nunique()
    per_variant = ", ".join(f"{v} {counts[v]}" for v in order if v in counts.index)
    caption = ("Representation probes per layer of the final models (x: input = what block 1 receives, blockN = "
               "residual stream after block N, final_norm = what the head reads). Line: mean over seeds; band: "
               f"min–max over seeds (jobs probed per variant: {per_variant}). Token identity: held-out accuracy of a "
               "linear probe reading the token k positions back; dashed: the same probe on each job's initial model "
               "(random features, mean over seeds); dotted grey: majority class. Code-bit accuracy: binary codes "
               "only, mean over the code's non-constant bits (dotted grey: mean majority-class accuracy per bit). Type-vector RSA: Spearman correlation of the layer's pairwise cosines between frequent token "
               "types with those of the learned input table of the same seed (learned runs: their own table).")
    return save(fig, out_dir, "probe_layers", caption)


def context_rows(panels: list[tuple], ncols: int):
    """Small multiples where each context starts a new row of panels (unused cells hidden)."""
    per_context: dict = {}
    for panel in panels:
        per_context.setdefault(panel[0], []).append(panel)
    heights = [-(-len(group) // ncols) for group in per_context.values()]
    fig, grid = plt.subplots(sum(heights), ncols, figsize=(3.0 * ncols, 2.6 * sum(heights)), squeeze=False)
    axes, row = [], 0
    for group, height in zip(per_context.values(), heights, strict=True):
        cells = [grid[row + i // ncols][i % ncols] for i in range(height * ncols)]
        axes += cells[:len(group)]
        for ax in cells[len(group):]:
            ax.set_visible(False)
        row += height
    return fig, axes


def _annotate(ax, matrix: np.ndarray) -> None:
    if max(matrix.shape) > MAX_ANNOTATED_LAYERS:
        return
    size = 6.5 if max(matrix.shape) <= 7 else 5.5
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            text = f"{value:.2f}"
            text = "1" if text == "1.00" else text.removeprefix("0")  # ".87": CKA lies in [0, 1]
            ax.text(j, i, text, ha="center", va="center", fontsize=size, color="white" if value < 0.55 else "black")


def probe_cka_figure(study, probes: ProbeData, out_dir: Path) -> FigureFile | None:
    pairs = probes.pairs
    pairs = pairs[pairs["kind"].notna() & (pairs["measure"] == "cka")]
    if pairs.empty:
        return None
    pairs = with_orders(pairs, study.jobs)
    context = context_columns(study.jobs)
    kinds = kind_order(pairs)
    panels = [(key, kind, category) for key in ordered_contexts(study) for kind, category in kinds
              if (context_mask(pairs, context, key) & (pairs["kind"] == kind)).any()]
    left_out = len(panels) - MAX_CKA_PANELS
    if left_out > 0:  # many arms: the baseline's pairs and the noise floors first
        panels = sorted(panels, key=lambda p: p[2] == CROSS_INPUT and not _with_baseline(pairs, p[1]))[:MAX_CKA_PANELS]
    ncols = min(3, len(panels))
    fig, axes = new_figure(len(panels), panel_width=2.9, height=2.9, ncols_max=ncols)
    image = None
    for ax, (key, kind, _category) in zip(axes, panels, strict=True):
        part = pairs[context_mask(pairs, context, key) & (pairs["kind"] == kind)]
        mean = part.pivot_table(index="a_layer_index", columns="b_layer_index", values="value", aggfunc="mean")
        a_names = list(part.drop_duplicates("a_layer_index").sort_values("a_layer_index")["a_layer"])
        b_names = list(part.drop_duplicates("b_layer_index").sort_values("b_layer_index")["b_layer"])
        matrix = mean.to_numpy(dtype=float)
        image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal", interpolation="nearest")
        _annotate(ax, matrix)
        ax.grid(False)
        ax.set_xticks(range(len(b_names)))
        ax.set_xticklabels(b_names, rotation=40, ha="right", rotation_mode="anchor", fontsize=7)
        ax.set_yticks(range(len(a_names)))
        ax.set_yticklabels(a_names, fontsize=7)
        first = part.iloc[0]
        ax.set_ylabel(f"{first['a_variant']} layer")
        ax.set_xlabel(f"{first['b_variant']} layer")
        n = part[["a_run", "b_run"]].drop_duplicates().shape[0]
        ax.set_title(f"{kind}\n({n} pair{'s' if n != 1 else ''})"
                     + (f", {context_title(context, key)}" if len(ordered_contexts(study)) > 1 else ""))
    cax = axes[ncols - 1].inset_axes([1.06, 0.0, 0.06, 1.0])
    fig.colorbar(image, cax=cax, label="linear CKA")
    caption = ("Linear CKA (Kornblith et al. 2019) between every layer of one final model (rows) and every layer of "
               "another (columns), on the same held-out tokens; each panel is the mean over the pairs of one kind: "
               "two inputs at the same seed, or one input at two seeds (\"across seeds\": the noise floor for the "
               "cross-input panels). Shared colour scale 0 to 1 (1 = the same representation up to rotation and "
               "isotropic scale); cell values annotated."
               + (f" {left_out} further pair kind(s) are only in tables/probes_cka.csv." if left_out > 0 else ""))
    return save(fig, out_dir, "probe_cka", caption)


def _with_baseline(pairs: pd.DataFrame, kind: str) -> bool:
    first = pairs[pairs["kind"] == kind].iloc[0]
    return first["a_variant_order"] == pairs["a_variant_order"].min()


TRAINING_ROWS = [("vs_reference_rsa", "RSA vs learned table"), ("identity_offset1", "token identity, offset 1"),
                 ("effective_rank", "effective rank")]


def training_jobs(probes: ProbeData) -> list[str]:
    """Runs with snapshots: more probed models than init and final."""
    values = probes.values
    if values.empty:
        return []
    counts = values.groupby("run")["order"].nunique()
    runs = counts[counts > 2].index
    jobs = values[values["run"].isin(runs)].drop_duplicates("run").sort_values(["variant_order", "seed", "run"])
    return list(jobs["run"])


def probe_training_figure(study, probes: ProbeData, out_dir: Path) -> FigureFile | None:
    runs = training_jobs(probes)
    if not runs:
        return None
    values = probes.values
    values = values[values["run"].isin(runs) & np.isfinite(values["tokens_seen"].astype(float))
                    & np.isfinite(values["value"].astype(float))]
    rows = [(m, title) for m, title in TRAINING_ROWS if (values["measure"] == m).any()]
    if not rows:
        return None
    fig, grid = plt.subplots(len(rows), len(runs), figsize=(3.2 * len(runs), 2.4 * len(rows)), squeeze=False,
                             sharex="col", sharey="row")
    all_names = _layer_names(values)
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, max(len(all_names), 2)))
    for c, run in enumerate(runs):
        job = values[values["run"] == run]
        names = _layer_names(job)
        for r, (measure, title) in enumerate(rows):
            ax = grid[r][c]
            part = job[job["measure"] == measure]
            for i, name in enumerate(names):
                line = part[part["layer_index"] == i].sort_values("tokens_seen")
                if not line.empty:
                    ax.plot(line["tokens_seen"], line["value"], color=colours[min(i, len(colours) - 1)], marker=".",
                            markersize=3, linewidth=1.2, label=name)
            if part.empty:
                ax.text(0.5, 0.5, "no learned reference" if measure == "vs_reference_rsa" else "not measured",
                        transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#555555")
            if measure.startswith(BOUNDED):
                ax.set_ylim(-0.02, 1.02)
            if c == 0:
                ax.set_ylabel(title)
            if r == 0:
                first = job.iloc[0]
                ax.set_title(f"{first['variant']}, seed {first['seed']}")
            if r == len(rows) - 1:
                ax.set_xlabel("training tokens")
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_number))
                ax.xaxis.set_major_locator(ticker.MaxNLocator(4))
    legend_outside(fig, list(grid.flat))
    caption = ("Representation over training, for jobs that kept step-* snapshots (checkpoint.keep_every_steps): every "
               "probed model of the job (the init at 0 tokens, each snapshot, the final model) against the training "
               "tokens behind it; one line per layer (dark: input, light: final_norm). Rows: "
               + "; ".join(title for _, title in rows)
               + ". RSA is against the final input table of the learned model of the same seed (for a learned job, "
                 "its own final table), so a learned job's input layer reaches 1 at the end by construction.")
    return save(fig, out_dir, "probe_training", caption)


def probe_figures(study, probes: ProbeData, out_dir: Path) -> list[FigureFile | None]:
    if probes.empty and probes.pairs.empty:
        return []
    return [probe_layers_figure(study, probes, out_dir), probe_cka_figure(study, probes, out_dir),
            probe_training_figure(study, probes, out_dir)]

