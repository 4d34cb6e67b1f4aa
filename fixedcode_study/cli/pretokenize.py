"""`python -m fixedcode_study.pretokenize [overrides] --out DIR --workers N`: tokenize a corpus into shards.

Sharded, restartable tokenization for corpora too large to prepare in memory; the work is done
by data/shards.py (its docstring describes the output folder). Train from the result with
`python -m fixedcode_study.run data=pretokenized data.dir=DIR`.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..config import compose
from ..data import shards
from ..data.shards import default_out_dir, pretokenize
from ..errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fixedcode_study.pretokenize", description=shards.__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the project config, e.g. data=paper_mix data.shard_mb=256")
    ap.add_argument("--out", help="output directory (default: the data cache, where training with the same data= finds it)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: data.workers, else all CPU cores); 0 = in this process")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar or messages")
    args = ap.parse_args(argv)

    data = compose(args.overrides).data
    workers = args.workers if args.workers is not None else (data.get("workers") or os.cpu_count() or 1)
    try:
        manifest = pretokenize(data, args.out, workers, progress=not args.no_progress)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    run = manifest["last_run"]
    print(f"[pretokenize] {manifest['train_tokens']:,} train / {manifest['val_tokens']:,} val tokens in "
          f"{len(manifest['shards'])} shards; tokenizer {manifest['tokenizer']['spec']} sha256 {manifest['tokenizer']['sha256'][:12]}")
    if run["shards_tokenized"]:
        print(f"[pretokenize] this run: {run['shards_tokenized']} shards, {run['input_bytes'] / 1e6:.1f} MB in "
              f"{run['seconds']:.1f}s = {run['mb_per_second']:.2f} MB/s, {run['tokens_per_second']:,.0f} tokens/s "
              f"with {run['workers']} worker(s)")
    print(f"[pretokenize] train with: data=pretokenized data.dir={args.out or default_out_dir(data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
