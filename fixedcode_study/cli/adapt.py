"""`fixedcode adapt checkpoint=DIR [inits=...] [tokens=N] [seed=S] [out=FILE]`: teach a model its held-out tokens;
`fixedcode adapt study=<study> [dry_run=true] [overrides]`: every job of a study.

    fixedcode adapt checkpoint=outputs/multirun/new_tokens/input=gf2,seed=1,... out=gf2-s1.json
    fixedcode adapt checkpoint=DIR inits=mean tokens=65536        # a learned table's mean init alone
    fixedcode adapt study=new_tokens dry_run=true                   # the study's jobs and their state
    fixedcode adapt study=new_tokens                                # after `fixedcode sweep new_tokens`

What does a fixed input code buy when the vocabulary grows (issue 44)? A model pretrained with a
seeded share of its merged tokens held out (train.heldout_fraction: each occurrence spelled with the
tokens its merge joined, data/heldout.py) adapts on the original tokens, where those ids occur. A
learned table's new rows start by each init (random at init std, the mean of the other rows, the mean
of the rows of the token's parts); a fixed code needs none. The head's new rows start the same way in
every arm (head_init). Every parameter then trains for tokens= tokens, and at step 0 and log-spaced
steps the record holds the loss on the held-out tokens as targets, on the token after one, on all
other tokens (forgetting), and the probability mass on the held-out set (adaptation/measures.py).

checkpoint= is a job directory, its checkpoints/final folder, or one of our exports whose source
checkpoint is here. A model trained on the whole vocabulary is refused in one line. The record,
adapt.json (out=), holds the model's fingerprint, the held-out set, the settings and every curve,
written atomically; on CPU the same model and settings give the same numbers.

study= adapts every completed job of a study (`fixedcode sweep <study>` with the same scale= and
overrides) under the settings its file declares (`adapt:`), into <study dir>/adapt/<job>/adapt.json.
A job not completed waits (named); one adapted from these weights under these settings is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from ..adaptation.settings import AdaptSettings
from ..errors import ConfigError
from .args import Command, exit_with, run_command

DEFAULT_OUT = "adapt.json"


@dataclass(frozen=True, kw_only=True)
class AdaptOptions:
    checkpoint: str | None = None
    """the model: a job directory trained with train.heldout_fraction, its checkpoint folder, or an export"""
    study: str | None = None
    """instead of checkpoint=: a study of sweeps/ (or a .yaml path) whose jobs to adapt"""
    scale: Literal["cpu", "paper"] = "cpu"
    """study= only: the scale its jobs ran at (as fixedcode sweep's scale=)"""
    dry_run: bool = False
    """study= only: list the jobs and what each waits for; adapt nothing"""
    settings: AdaptSettings = field(default_factory=AdaptSettings)
    out: str = DEFAULT_OUT
    """the record's file (checkpoint= only)"""

    def __post_init__(self) -> None:
        if self.study is None:
            if self.checkpoint is None:
                raise ConfigError("checkpoint", "missing", "pass checkpoint=<a job directory or checkpoint folder>, "
                                  "or study=<study> for every job of a study")
            if self.dry_run or self.scale != "cpu":
                key = "dry_run" if self.dry_run else "scale"
                raise ConfigError(key, "applies to study= only", f"drop {key}= or pass study=<study>")
            return
        given = (["checkpoint"] if self.checkpoint is not None else []) + [
            f.name for f in fields(AdaptSettings) if getattr(self.settings, f.name) != f.default]
        if given or self.out != DEFAULT_OUT:
            raise ConfigError((given or ["out"])[0], "does not apply with study=",
                              "a study's adaptation settings are its file's adapt: (edit them there, or pass "
                              "study=FILE.yaml) and its records go to <study dir>/adapt/; or pass checkpoint= alone")


COMMAND = Command("adapt", __doc__, AdaptOptions,
                  overrides="with study=, every other key=value is an override of its jobs, as given to fixedcode sweep.")


def adapt_study(options: AdaptOptions, overrides: list[str]) -> int:
    from ..record.jobdir import ADAPT_DIR
    from ..studies.adapted import adapt_study as run_study
    from ..studies.study import load_study
    from .sweep import plan

    study = load_study(options.study)
    if study.adapt is None:
        raise ConfigError("study", f"{study.name} declares no adaptation",
                          "add an adapt: block to its file (sweeps/new_tokens.yaml) or pass checkpoint=")
    jobs = plan(study, options.scale, overrides)
    out_dir = jobs[0].job_dir.parent / ADAPT_DIR
    outcome = run_study(jobs, AdaptSettings(**study.adapt), out_dir, dry_run=options.dry_run)
    print("\n".join(outcome.lines(options.study, out_dir)))
    return 0


def adapt_model(options: AdaptOptions, overrides: list[str]) -> int:
    if options.study is not None:
        return adapt_study(options, overrides)
    if overrides:
        raise ConfigError(overrides[0].partition("=")[0], "is not a setting of `fixedcode adapt`",
                          "see fixedcode adapt --help (overrides of jobs apply to study= only)")
    from ..adaptation.run import adapt_checkpoint
    from ..hub.source import checkpoint_folder
    from ..record import atomic

    folder = checkpoint_folder(options.checkpoint, "pass the job it was exported from")
    record = adapt_checkpoint(folder, options.settings)
    atomic.write_json(options.out, record)
    print(f"[adapt] -> {options.out} ({record['seconds']:.1f}s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, adapt_model)


if __name__ == "__main__":
    exit_with(main())
