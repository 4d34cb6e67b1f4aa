"""`python -m fixedcode_study.bench_input [options] [hydra overrides]`: the input layer alone.

Forward, backward and optimizer cost of each input interface at paper width; see
systems/bench_input.py for what is measured.
"""

from __future__ import annotations

import argparse
import sys

import torch

from ..errors import ConfigError
from ..record import atomic
from ..systems import bench_input
from ..systems.bench_input import PAPER_D_MODEL, PAPER_VOCAB, format_table, run_input_bench


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m fixedcode_study.bench_input", description=bench_input.__doc__.split("\n")[0])
    p.add_argument("--inputs", default="learned,binary16,gf2")
    p.add_argument("--vocab", type=int, default=PAPER_VOCAB)
    p.add_argument("--d-model", type=int, default=PAPER_D_MODEL)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--prototypes", action="store_true", help="also time candidate fixed-code forwards")
    p.add_argument("--json", default=None, help="write the report here as JSON")
    args, overrides = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        if any(o.startswith("--") for o in overrides):
            bad = next(o for o in overrides if o.startswith("--"))
            raise ConfigError(bad, "not an option of the input benchmark", "see --help")
        if args.threads:
            torch.set_num_threads(args.threads)
        rep = run_input_bench(overrides, inputs=tuple(s for s in args.inputs.split(",") if s),
                              vocab_size=args.vocab, d_model=args.d_model, batch=args.batch, seq=args.seq,
                              repeats=args.repeats, device=args.device, prototypes=args.prototypes)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(format_table(rep))
    if args.json:
        atomic.write_json(args.json, rep)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
