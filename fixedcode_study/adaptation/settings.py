"""What `fixedcode adapt` takes besides the model: the settings alone, so `--help` reads them without
torch. run.py adapts a checkpoint with them; cli/adapt.py takes these fields as its keys."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

INPUT_INITS = ("random", "mean", "parts_mean")  # a learned table's new rows (rows.py)
HEAD_INITS = ("random", "mean")                # the head's new rows, one rule for every arm
GRAD_CLIP = 1.0  # the adaptation's gradient-norm clip: conf/trainer's gradient_clip_val, as the jobs trained


@dataclass(frozen=True)
class AdaptSettings:
    """How a checkpoint adapts to its held-out tokens (checked on construction: a bad value is one line
    naming the key)."""

    tokens: int = 131072
    """adaptation tokens (2^17), drawn from the original training split, where H occurs"""
    batch_size: int = 16
    """sequences per adaptation step (of the job's seq_len)"""
    lr: float = 1e-3
    """AdamW learning rate of the adaptation (constant; every parameter trains)"""
    val_points: int = 8
    """measurements: step 0 (before any update) and then log-spaced steps ending on the last"""
    val_tokens: int = 32768
    """held-out tokens each measurement reads: windows spread evenly over the split (0: every window)"""
    inits: str = ",".join(INPUT_INITS)
    """comma-separated inits of a learned table's new rows (random, mean, parts_mean); a fixed code needs none"""
    head_init: str = "random"
    """the head's new rows in every arm: random (N(0, init_std^2) from seed: the same rows for every model) or mean"""
    seed: int = 0
    """seeds the new rows' draws and the adaptation batches (the same for every init and arm)"""

    def __post_init__(self) -> None:
        unknown = [i for i in self.input_inits if i not in INPUT_INITS]
        if unknown or not self.input_inits:
            raise ConfigError("inits", f"{unknown[0]!r} is not an init" if unknown else "names no init",
                              f"pass inits=<comma-separated names among {', '.join(INPUT_INITS)}>")
        if self.head_init not in HEAD_INITS:
            raise ConfigError("head_init", f"{self.head_init!r} is not a head init",
                              f"pass head_init={' or '.join(HEAD_INITS)}")
        for key, low in (("tokens", 1), ("batch_size", 1), ("val_points", 2), ("val_tokens", 0), ("seed", 0)):
            if getattr(self, key) < low:
                raise ConfigError(key, f"{getattr(self, key)} is below {low}", f"pass {key}>={low}")
        if not self.lr > 0:
            raise ConfigError("lr", f"{self.lr} is not positive", "pass lr=<a positive number>")

    @property
    def input_inits(self) -> tuple[str, ...]:
        """The inits asked for, in INPUT_INITS' order, each once."""
        named = {i.strip() for i in self.inits.split(",") if i.strip()}
        return tuple([i for i in INPUT_INITS if i in named] + sorted(named - set(INPUT_INITS)))

    def record(self) -> dict:
        """adapt.json `settings`: every setting, and the fixed choices beside them."""
        return {"tokens": self.tokens, "batch_size": self.batch_size, "lr": self.lr, "val_points": self.val_points,
                "val_tokens": self.val_tokens, "inits": list(self.input_inits), "head_init": self.head_init,
                "seed": self.seed, "grad_clip": GRAD_CLIP, "weight_decay": 0.0, "precision": "32-true",
                "optimizer": "AdamW (the job's betas and eps), constant lr, every parameter trains"}
