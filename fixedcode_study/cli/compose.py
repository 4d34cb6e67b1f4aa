"""`fixedcode compose a=DIR b=DIR [measures=...] [stitch_tokens=N] [seed=S] [out=FILE]`: combine two models.

    fixedcode compose a=outputs/multirun/main/input=gf2,seed=1 b=outputs/multirun/main/input=gf2,seed=2 out=gf2.json
    fixedcode compose a=DIR b=DIR measures=ensemble,barrier out=reports/compose/gf2-s1-s2.json
    fixedcode compose a=DIR b=DIR measures=stitch stitch_tokens=0        # identity stitches only

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
holds both members' fingerprints and specs, every number, the settings and the seed, and is
written atomically; on CPU the same pair and settings give the same numbers. The work is
composition/'s (composition/run.py describes the record).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..composition.settings import ComposeSettings
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class ComposeOptions:
    a: str
    """the first model: a job directory, its checkpoint folder, or an export of one"""
    b: str
    """the second model (the top half of every stitch)"""
    settings: ComposeSettings = field(default_factory=ComposeSettings)
    out: str = "compose.json"
    """the record's file"""


COMMAND = Command("compose", __doc__, ComposeOptions)


def compose_models(options: ComposeOptions, _overrides: list[str]) -> int:
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
