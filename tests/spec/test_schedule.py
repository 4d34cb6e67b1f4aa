"""The validation schedule: which optimizer steps validate, and that Lightning validates at exactly those."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import lightning as L
import pytest

from fixedcode_study.config import compose
from fixedcode_study.data.prepare import prepare
from fixedcode_study.errors import ConfigError
from fixedcode_study.spec import JobSpec, TrainSpec
from fixedcode_study.training.schedule import ValidationSchedule, every_steps, validation_schedule, validation_steps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.pretokenize import fit_briefly, text_files_cfg, write_corpus  # noqa: E402


@pytest.mark.parametrize("max_steps,points,first", [(256, 16, 1), (32, 16, 1), (95368, 16, 1), (95368, 64, 1),
                                                    (10**7, 500, 1), (1000, 12, 10), (7, 3, 1), (5, 1, 1)])
def test_log_steps_are_increasing_distinct_and_end_on_the_last_step(max_steps, points, first):
    steps = validation_steps(max_steps, points, first)
    assert steps == sorted(set(steps)) and steps[-1] == max_steps
    assert len(steps) == min(points, max_steps - first + 1)  # the points asked for, never fewer
    assert steps[0] == (first if points > 1 else max_steps)


def test_log_steps_are_geometric_where_the_spacing_exceeds_one_step():
    # Exactly geometric sequences exist for these: the rounding must land on them.
    assert validation_steps(10**6, 7) == [10**k for k in range(7)]
    assert validation_steps(4096, 13) == [2**k for k in range(13)]
    assert validation_steps(3**10, 11) == [3**k for k in range(11)]
    # Where a geometric spacing is below one step, consecutive steps are taken; after that the
    # ratio between neighbours settles and never grows (sparse late, never denser late).
    steps = validation_steps(256, 16)
    ratios = [b / a for a, b in zip(steps, steps[1:])]
    assert steps[:4] == [1, 2, 3, 4]
    late = ratios[4:]
    assert max(late) / min(late) < 1.25 and late[-1] == pytest.approx(math.sqrt(2), rel=0.02)


def test_every_keeps_the_fixed_cadence_and_always_ends_on_the_last_step():
    assert every_steps(256, 64) == [64, 128, 192, 256]
    assert every_steps(100, 64) == [64, 100]  # the budget ends between two validations
    assert every_steps(10, 64) == [10]
    assert validation_schedule("every", 99, 16, 40) == [16, 32, 40]  # only the chosen schedule's count is read
    spec = JobSpec.from_cfg(compose(["model=test_micro", "train.val_schedule=every", "train.val_every=16",
                                     "train.tokens=40960", "train.batch_size=16"]))  # 40 steps of 1024 tokens
    assert spec.validation_steps == (16, 32, 40)
    with pytest.raises(ConfigError, match=r"^train.val_schedule: is missing"):  # a default is declared once, in conf/
        TrainSpec.of({k: v for k, v in spec.train.to_json().items() if k != "val_schedule"})


def test_bad_schedule_settings_are_one_line_config_errors():
    with pytest.raises(ConfigError, match=r"^train.val_schedule: unknown schedule 'linear'"):
        validation_schedule("linear", 4, 4, 10)
    with pytest.raises(ConfigError, match=r"^train.val_points: 0 is below 1"):
        validation_schedule("log", 0, 4, 10)
    with pytest.raises(ConfigError, match=r"^train.val_every"):
        validation_schedule("every", 4, 0, 10)
    # the spec refuses them where it is built, before any schedule is computed
    for bad, message in (("train.val_schedule=linear", r"^train.val_schedule: unknown schedule 'linear'"),
                         ("train.val_points=0", r"^train.val_points: 0 is not an integer >= 1"),
                         ("train.val_every=0", r"^train.val_every")):
        with pytest.raises(ConfigError, match=message):
            JobSpec.from_cfg(compose(["model=test_micro", bad]))


def test_the_cpu_default_validates_at_least_twelve_times():
    spec = JobSpec.from_cfg(compose([]))
    plan, steps = spec.plan, list(spec.validation_steps)
    assert spec.train.val_schedule == "log" and len(steps) >= 12, steps
    assert steps[-1] == plan.max_steps
    # dense early: a quarter of the points within the first 2% of training
    assert sum(s <= 0.02 * plan.max_steps for s in steps) >= len(steps) // 4


class ValidationLog(L.Callback):
    """The optimizer step of every validation pass, and the number of validation batches run."""

    def __init__(self):
        self.steps: list[int] = []
        self.batches = 0

    def on_validation_end(self, trainer, pl_module):
        self.steps.append(trainer.global_step)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self.batches += 1


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schedule")
    root = tmp / "corpus"
    write_corpus(root)
    return prepare(text_files_cfg(root, tmp), progress=False)


@pytest.mark.parametrize("grad_accum", [1, 3])
def test_lightning_validates_at_exactly_the_scheduled_steps(prepared, grad_accum):
    max_steps = 20
    steps = validation_steps(max_steps, 7)
    assert steps != every_steps(max_steps, steps[1] - steps[0])  # not a cadence Lightning could do alone
    log = ValidationLog()
    # val_check_interval deliberately wrong: the callback alone decides
    task, dm, rows = fit_briefly(prepared, max_steps, [ValidationSchedule(steps, grad_accum), log],
                                 val_check_interval=3, grad_accum=grad_accum)
    assert log.steps == steps
    # cost scales with the schedule: one full pass per scheduled step, nothing at the others
    per_pass = math.ceil(len(dm.val_set) / dm.val_batch_size)
    assert log.batches == len(steps) * per_pass
    logged = [step for step, metrics in rows if "val/loss" in metrics]
    assert logged == steps and task.last_val_step == max_steps


def test_every_schedule_through_the_callback_matches_lightnings_own_cadence(prepared):
    """`every` through ValidationSchedule validates where val_check_interval did, with equal numbers."""
    own, scheduled = ValidationLog(), ValidationLog()
    _, _, rows_own = fit_briefly(prepared, 12, [own], val_check_interval=4, grad_accum=2)
    _, _, rows_sched = fit_briefly(prepared, 12, [ValidationSchedule(every_steps(12, 4), 2), scheduled], grad_accum=2)
    assert own.steps == scheduled.steps == [4, 8, 12]
    timeless = lambda rows: [(step, {k: v for k, v in m.items() if "per_second" not in k}) for step, m in rows]  # noqa: E731
    assert timeless(rows_own) == timeless(rows_sched)  # every logged value, bit for bit
