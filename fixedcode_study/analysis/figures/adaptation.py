"""The adaptation section's figure, drawing the numbers it is given (tables/adaptation.py curve_frame)
and computing nothing: each measure against adaptation tokens, one panel per measure, one line per arm
and init (the mean over seeds)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..read.adapt import FIXED_INIT, REFERENCE_INIT
from .style import FigureFile, legend_outside, line_kwargs, new_figure, save

CURVES = "adaptation_curves"
PANELS = (("heldout_loss", "loss on held-out tokens (nats)"), ("after_heldout_loss", "loss after a held-out token"),
          ("other_loss", "loss on other tokens"), ("heldout_mass", "probability on the held-out set"))
INIT_DASHES = {REFERENCE_INIT: "-", FIXED_INIT: "-", "random": ":", "parts_mean": "--"}


def curves_figure(frame: pd.DataFrame, context: list[str], styles: dict[str, dict], out_dir: Path) -> FigureFile | None:
    if frame.empty:
        return None
    fig, axes = new_figure(len(PANELS), panel_width=3.0, height=2.6)
    for ax, (measure, label) in zip(axes, PANELS, strict=True):
        for key, rows in frame.groupby([*context, "variant", "init"], sort=False, dropna=False):
            key = key if isinstance(key, tuple) else (key,)
            arm, init = str(key[-2]), str(key[-1])
            style = line_kwargs(styles.get(arm, {"color": "#777777", "linestyle": "-", "marker": "o"}))
            style["linestyle"] = INIT_DASHES.get(init, "-.")
            rows = rows.sort_values("tokens")
            name = " · ".join(str(k) for k in key[:-1]) + ("" if init == FIXED_INIT else f" ({init})")
            ax.plot(rows["tokens"].clip(lower=1), rows[measure], label=name, **style)
        ax.set_xscale("symlog", linthresh=max(float(frame.loc[frame["tokens"] > 0, "tokens"].min()), 1.0))
        ax.set_xlabel("adaptation tokens")
        ax.set_title(label, fontsize="small")
    legend_outside(fig, axes)
    caption = ("Adapting to held-out tokens: each measure against the adaptation tokens (0 = before any update), per "
               "arm and init of a learned table's new rows (solid: the mean init and the fixed codes; dotted: random; "
               "dashed: the mean of the token's parts), the mean over seeds. The numbers are "
               "tables/adaptation_curves.csv.")
    return save(fig, out_dir, CURVES, caption)
