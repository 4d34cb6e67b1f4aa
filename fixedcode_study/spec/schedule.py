"""When validation runs: a fixed list of optimizer steps, a pure function of the settings.

Curves are read on a log-tokens axis, where a fixed cadence (`train.val_every`) puts almost all
points at the end: 2^19 tokens in 256 steps validated every 64 steps gives 4 points, none in the
first quarter of training. `train.val_schedule: log` spaces `train.val_points` validations
geometrically from step 1 to the last step instead (dense early, sparse late);
`train.val_schedule: every` keeps the fixed cadence. Both always end on the last step, so a job's
final numbers come from a validation inside the fit.

The schedule is a pure function of (max_steps, settings), computed in exact integer arithmetic, so
every rank of a ddp/fsdp job derives the same list without talking to the others, and a resumed
job the same list as the attempt it continues. training/schedule.py makes Lightning follow it.
"""


from __future__ import annotations

import math
from ..errors import ConfigError

SCHEDULES = ("log", "every")


def _floor_root(value: int, k: int, lo: int, hi: int) -> int:
    """The largest n in [lo, hi] with n**k <= value (given lo**k <= value), exactly.

    A float estimate, then integer comparisons: the answer never depends on float rounding,
    only the number of correcting steps does.
    """
    n = min(hi, max(lo, int(math.exp(math.log(value) / k))))
    while n > lo and n**k > value:
        n -= 1
    while n < hi and (n + 1) ** k <= value:
        n += 1
    return n


def validation_steps(max_steps: int, points: int, first: int = 1) -> list[int]:
    """`points` optimizer steps from `first` to `max_steps`, geometrically spaced, strictly increasing.

    Each next step is the geometric interpolation from the current one to max_steps over the
    points still to place, rounded to the nearest integer in log space, but at least one step on:
    early on, where the ideal spacing is below one step, consecutive steps are taken, and the ratio
    of the rest adapts so that exactly `points` steps come out (all steps when there are fewer).
    The last is always max_steps. Integer arithmetic only: identical on every machine and rank.
    """
    max_steps, points, first = int(max_steps), int(points), int(first)
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    first = min(max(1, first), max_steps)
    if points >= max_steps - first + 1:
        return list(range(first, max_steps + 1))
    if points == 1:
        return [max_steps]
    steps = [first]
    while len(steps) < points:
        left = points - len(steps)  # still to place, the last of them being max_steps
        s = steps[-1]
        # ideal = s * (max_steps / s) ** (1 / left); ideal ** left = s ** (left - 1) * max_steps exactly
        target = s ** (left - 1) * max_steps
        lower = _floor_root(target, left, s, max_steps)
        upper = lower + 1
        # nearest in log space: upper iff ideal >= sqrt(lower * upper) iff target^2 >= (lower*upper)^left
        nearest = upper if lower**left != target and target * target >= (lower * upper) ** left else lower
        # at least one step on, and room left for the remaining points below max_steps
        steps.append(min(max(s + 1, nearest), max_steps - (left - 1)))
    return steps


def every_steps(max_steps: int, every: int) -> list[int]:
    """Every `every`-th optimizer step, and the last one."""
    return sorted(set(range(int(every), int(max_steps) + 1, int(every))) | {int(max_steps)})


def validation_schedule(kind: str, points: int, every: int, max_steps: int) -> list[int]:
    """The validation steps of a job from its `train` settings (`val_schedule`, `val_points`,
    `val_every`; spec/parts.TrainSpec). Only the chosen schedule's own count is read."""
    if kind == "log":
        if int(points) < 1:
            raise ConfigError("train.val_points", f"{points} is below 1", "use the number of validations wanted, e.g. 16")
        return validation_steps(max_steps, int(points))
    if kind == "every":
        if int(every) < 1:
            raise ConfigError("train.val_every", f"{every} is below 1", "use a positive number of optimizer steps")
        return every_steps(max_steps, int(every))
    raise ConfigError("train.val_schedule", f"unknown schedule {kind!r}", f"use one of {', '.join(SCHEDULES)}")
