"""What `fixedcode compose` takes besides the two models: the settings alone, so `--help` reads them
without torch. run.py composes a pair with them; cli/compose.py takes these fields as its keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError

MEASURES = ("ensemble", "stitch", "barrier")
BARRIER_POINTS = 11  # alphas 0, 0.1, ..., 1 (the 11 points)
STITCH_GRAD_CLIP = 1.0  # the stitch's gradient-norm clip: conf/trainer's gradient_clip_val, as members trained


@dataclass(frozen=True)
class ComposeSettings:
    """How a pair is composed (check() runs on construction: a bad value is one line naming the key)."""

    measures: str = ",".join(MEASURES)
    """comma-separated measures among ensemble, stitch, barrier"""
    stitch_tokens: int = 131072
    """training tokens of each affine stitch, drawn from the members' training split (0: identity stitches only)"""
    stitch_batch_size: int = 16
    """sequences per affine-stitch training step (of the members' seq_len)"""
    stitch_lr: float = 1e-3
    """AdamW learning rate of the affine stitch (constant; no weight decay, which would pull it off the identity)"""
    seed: int = 0
    """seeds the affine stitch's training batches (their draw is training's, data/batches.py)"""
    precision: str | None = None
    """precision of the validations (a Lightning precision); default: the members' trainer.precision"""
    accelerator: Literal["cpu", "gpu"] = "cpu"
    """cpu or gpu: where validations and stitch training run"""

    def __post_init__(self) -> None:
        unknown = [m for m in self.measure_names if m not in MEASURES]
        if unknown or not self.measure_names:
            raise ConfigError("measures", f"{unknown[0]!r} is not a measure" if unknown else "names no measure",
                              f"pass measures=<comma-separated names among {', '.join(MEASURES)}>")
        for key, low in (("stitch_tokens", 0), ("stitch_batch_size", 1), ("seed", 0)):
            if getattr(self, key) < low:
                raise ConfigError(key, f"{getattr(self, key)} is below {low}", f"pass {key}>={low}")
        if not self.stitch_lr > 0:
            raise ConfigError("stitch_lr", f"{self.stitch_lr} is not positive", "pass stitch_lr=<a positive number>")
        if self.accelerator not in ("cpu", "gpu"):
            raise ConfigError("accelerator", f"{self.accelerator!r} is not cpu or gpu", "pass accelerator=cpu or gpu")

    @property
    def measure_names(self) -> tuple[str, ...]:
        """The measures asked for, in the order they run (MEASURES'), each once."""
        named = {m.strip() for m in self.measures.split(",") if m.strip()}
        return tuple([m for m in MEASURES if m in named] + sorted(named - set(MEASURES)))

    def record(self) -> dict:
        """compose.json `settings`: every setting as given, and the fixed choices beside them."""
        return {"measures": list(self.measure_names), "stitch_tokens": self.stitch_tokens,
                "stitch_batch_size": self.stitch_batch_size, "stitch_lr": self.stitch_lr, "seed": self.seed,
                "precision": self.precision, "accelerator": self.accelerator, "barrier_points": BARRIER_POINTS,
                "stitch_grad_clip": STITCH_GRAD_CLIP}
