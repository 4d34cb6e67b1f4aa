"""How `generate` draws samples: the settings alone, so a command's `--help` reads them without torch.

hub/generation.py samples with them; cli/generate.py takes its sampling settings from these fields
(their docstrings are its help).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass
class SampleSettings:
    """How samples are drawn (the `generate` command's sampling settings; check() tests each)."""

    n: int = 3
    """samples per prompt"""
    max_new_tokens: int = 48
    """tokens generated per sample"""
    temperature: float = 0.8
    """sampling temperature; 0 = greedy (then n is 1: every greedy sample is the same)"""
    top_k: int = 50
    """keep the k likeliest tokens; 0 = no top-k cut"""
    seed: int = 0
    """sampling seed"""

    def check(self) -> None:
        for key, low in (("n", 1), ("max_new_tokens", 1), ("top_k", 0), ("seed", 0)):
            if getattr(self, key) < low:
                raise ConfigError(key, f"{getattr(self, key)} is below {low}", f"pass {key}>={low}")
        if self.temperature < 0:
            raise ConfigError("temperature", f"{self.temperature} is negative", "pass temperature>=0 (0 = greedy)")
