"""`fixedcode compose a=DIR b=DIR [measures=...] [stitch_tokens=N] [seed=S] [out=FILE]`: combine two models;
`fixedcode compose study=<study> [dry_run=true] [overrides]`: every pair a study declares.

    fixedcode compose a=outputs/multirun/main/input=gf2,seed=1 b=outputs/multirun/main/input=gf2,seed=2 out=gf2.json
    fixedcode compose a=DIR b=DIR measures=ensemble,barrier out=reports/compose/gf2-s1-s2.json
    fixedcode compose a=DIR b=DIR measures=stitch stitch_tokens=0        # identity stitches only
    fixedcode compose study=composition dry_run=true                     # the study's pairs and their state
    fixedcode compose study=composition                                  # after `fixedcode sweep composition`

Does a shared fixed input make two models easier to combine (issue 44)? For two models of one
vocabulary, corpus and architecture (typically one arm at two seeds), three measures on the
members' held-out split, each loss computed by training's own final validation:
  ensemble  the mean of the two models' logits (and the probability mixture): val loss and bpb,
            and the gain over the better member;
  stitch    blocks 0..k-1 of a, a stitch, blocks k.. of b with b's final norm and head, at every k
            in 0..n_layer, through the identity and through an affine map trained on stitch_tokens
            training tokens with everything else frozen (Bansal et al., arXiv 2106.07682);
  barrier   the loss at 11 points of the straight line between the two weight sets (no alignment),
            and its largest excess over the line between the two endpoint losses.
a= and b= are each a job directory, its checkpoints/final folder, or one of our exports whose
source checkpoint is here (hub/source.py: the rule of every command that reads a model). A pair
that differs in vocabulary, tokenizer, data, seq_len or architecture (or, for the barrier, in its
parameters or buffers) is refused in one line naming the field. The record, compose.json (out=),
holds both members' fingerprints and specs, every number, the settings and the seed, and is written
atomically; on CPU the same pair and settings give the same numbers (composition/run.py: the record).

study= composes every pair a study file declares (`pairs:`: arms, seed pairs, settings: the file's
alone) from the jobs `fixedcode sweep <study>` trains with the same scale= and overrides, into
<study dir>/compose/<arm>,seeds=<a>+<b>/compose.json. A pair waits while its jobs are not completed
(each named); one composed from these weights under these settings is skipped, any other composed
again (studies/pairs.py). dry_run=true says which, composing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from ..composition.settings import ComposeSettings
from ..errors import ConfigError
from .args import Command, exit_with, run_command

DEFAULT_OUT = "compose.json"


@dataclass(frozen=True, kw_only=True)
class ComposeOptions:
    a: str | None = None
    """the first model: a job directory, its checkpoint folder, or an export of one"""
    b: str | None = None
    """the second model (the top half of every stitch)"""
    study: str | None = None
    """instead of a= and b=: a study of sweeps/ (or a .yaml path) whose declared pairs to compose"""
    scale: Literal["cpu", "paper"] = "cpu"
    """study= only: the scale its jobs ran at (as fixedcode sweep's scale=)"""
    dry_run: bool = False
    """study= only: list the pairs and what each waits for; compose nothing"""
    settings: ComposeSettings = field(default_factory=ComposeSettings)
    out: str = DEFAULT_OUT
    """the record's file (a= and b= only)"""

    def __post_init__(self) -> None:
        if self.study is None:
            missing = next((role for role in ("a", "b") if getattr(self, role) is None), None)
            if missing or self.dry_run or self.scale != "cpu":
                key = missing or ("dry_run" if self.dry_run else "scale")
                raise ConfigError(key, "missing" if missing else "applies to study= only",
                                  f"pass {key}=<a job directory or checkpoint folder>, or study=<study> for the pairs "
                                  "a study declares" if missing else f"drop {key}= or pass study=<study>")
            return
        given = [role for role in ("a", "b") if getattr(self, role) is not None] + [
            f.name for f in fields(ComposeSettings) if getattr(self.settings, f.name) != f.default]
        if given or self.out != DEFAULT_OUT:  # the study's file says these (pairs:), and where records go
            raise ConfigError((given or ["out"])[0], "does not apply with study=",
                              "a study's pairs and compose settings are its file's pairs: (edit them there, or pass "
                              "study=FILE.yaml) and its records go to <study dir>/compose/; or pass a= and b= alone")

COMMAND = Command("compose", __doc__, ComposeOptions,
                  overrides="with study=, every other key=value is an override of its jobs, as given to fixedcode sweep.")


def compose_study(options: ComposeOptions, overrides: list[str]) -> int:
    from ..studies.pairs import COMPOSE_DIR, compose_study, plan_pairs
    from ..studies.study import load_study
    from .sweep import plan

    study = load_study(options.study)
    jobs = plan(study, options.scale, overrides)  # the jobs `fixedcode sweep` runs with these overrides
    out_dir = jobs[0].job_dir.parent / COMPOSE_DIR
    outcome = compose_study(plan_pairs(study, jobs), study.pairs.settings, out_dir, dry_run=options.dry_run)
    print("\n".join(outcome.lines(options.study, out_dir)))
    return 0


def compose_models(options: ComposeOptions, overrides: list[str]) -> int:
    if options.study is not None:
        return compose_study(options, overrides)
    if overrides:
        raise ConfigError(overrides[0].partition("=")[0], "is not a setting of `fixedcode compose`",
                          "see fixedcode compose --help (overrides of jobs apply to study= only)")
    from ..composition.run import compose_pair, summary
    from ..hub.source import checkpoint_folder
    from ..record import atomic

    folders = [checkpoint_folder(getattr(options, role), "pass the job it was exported from", field=role)
               for role in ("a", "b")]
    record = compose_pair(*folders, options.settings)
    atomic.write_json(options.out, record)
    for line in summary(record):
        print(line)
    print(f"[compose] -> {options.out} ({record['seconds']:.1f}s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, compose_models)


if __name__ == "__main__":
    exit_with(main())
