"""`fixedcode pretokenize [overrides] [out=DIR] [workers=N] [progress=false]`: tokenize a corpus into shards.

    fixedcode pretokenize data=text_files 'data.paths=[corpus/*.txt]' data.vocab_size=8192 workers=2 out=/data/bpe8k
    fixedcode pretokenize data=paper_mix workers=32            # into the data cache

Sharded, restartable tokenization for corpora too large to prepare in memory; the work is done
by data/shards.py (its docstring describes the output folder). The overrides are those of
`fixedcode run` (the conf/data group). Train from the result with
`fixedcode run data=pretokenized data.dir=DIR`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config import compose
from ..errors import ConfigError
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class PretokenizeOptions:
    out: str | None = None
    """output folder (default: the data cache, where training with the same data= finds it)"""
    workers: int | None = None
    """worker processes (default: data.workers, else all CPU cores); 0 = in this process"""
    progress: bool = True
    """show the progress bar and messages"""

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 0:
            raise ConfigError("workers", f"{self.workers} is negative", "pass workers=0 (this process) or more")


COMMAND = Command("pretokenize", __doc__, PretokenizeOptions, overrides=True)


def run_pretokenize(options: PretokenizeOptions, overrides: list[str]) -> int:
    from ..data.shards import default_out_dir, pretokenize

    data = compose(overrides).data
    workers = options.workers if options.workers is not None else (data.get("workers") or os.cpu_count() or 1)
    if workers < 0:
        raise ConfigError("data.workers", f"{workers} is negative", "pass workers=0 (this process) or more")
    manifest = pretokenize(data, options.out, workers, progress=options.progress)
    run, tokenizer = manifest["last_run"], manifest["tokenizer"]
    print(f"[pretokenize] {manifest['train_tokens']:,} train / {manifest['val_tokens']:,} val tokens in "
          f"{len(manifest['shards'])} shards; tokenizer {tokenizer['spec']} sha256 {tokenizer['sha256'][:12]}")
    if run["shards_tokenized"]:
        print(f"[pretokenize] this run: {run['shards_tokenized']} shards, {run['input_bytes'] / 1e6:.1f} MB in "
              f"{run['seconds']:.1f}s = {run['mb_per_second']:.2f} MB/s, {run['tokens_per_second']:,.0f} tokens/s "
              f"with {run['workers']} worker(s)")
    print(f"[pretokenize] train with: data=pretokenized data.dir={options.out or default_out_dir(data)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, run_pretokenize)


if __name__ == "__main__":
    exit_with(main())
