"""`fixedcode pretokenize [overrides] [--out DIR] [--workers N] [--no-progress]`: tokenize a corpus into shards.

    fixedcode pretokenize data=text_files 'data.paths=[corpus/*.txt]' data.vocab_size=8192 --workers 2 --out /data/bpe8k
    fixedcode pretokenize data=paper_mix --workers 32          # into the data cache
    python -m fixedcode_study.pretokenize data=paper_mix ...   # the same command

Sharded, restartable tokenization for corpora too large to prepare in memory; the work is done
by data/shards.py (its docstring describes the output folder). The overrides are those of
`fixedcode run` (the conf/data group). Train from the result with
`fixedcode run data=pretokenized data.dir=DIR`.
"""

from __future__ import annotations

import os
from typing import Any

from ..config import compose
from ..data.shards import default_out_dir, pretokenize
from ..errors import ConfigError
from .args import Command, Key, exit_with, run_command

COMMAND = Command("pretokenize", __doc__, overrides=True, keys=(
    Key("out", None, "output folder (default: the data cache, where training with the same data= finds it)",
        flag="--out", kind=str),
    Key("workers", None, "worker processes (default: data.workers, else all CPU cores); 0 = in this process",
        flag="--workers", kind=int),
    Key("no_progress", False, "no progress bar or messages", flag="--no-progress"),
))


def run_pretokenize(values: dict[str, Any], overrides: list[str]) -> int:
    data = compose(overrides).data
    workers = values["workers"] if values["workers"] is not None else (data.get("workers") or os.cpu_count() or 1)
    if workers < 0:
        raise ConfigError("--workers", f"{workers} is negative", "pass --workers 0 (this process) or more")
    manifest = pretokenize(data, values["out"], workers, progress=not values["no_progress"])
    run, tokenizer = manifest["last_run"], manifest["tokenizer"]
    print(f"[pretokenize] {manifest['train_tokens']:,} train / {manifest['val_tokens']:,} val tokens in "
          f"{len(manifest['shards'])} shards; tokenizer {tokenizer['spec']} sha256 {tokenizer['sha256'][:12]}")
    if run["shards_tokenized"]:
        print(f"[pretokenize] this run: {run['shards_tokenized']} shards, {run['input_bytes'] / 1e6:.1f} MB in "
              f"{run['seconds']:.1f}s = {run['mb_per_second']:.2f} MB/s, {run['tokens_per_second']:,.0f} tokens/s "
              f"with {run['workers']} worker(s)")
    print(f"[pretokenize] train with: data=pretokenized data.dir={values['out'] or default_out_dir(data)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, run_pretokenize)


if __name__ == "__main__":
    exit_with(main())
