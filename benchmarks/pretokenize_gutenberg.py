"""Benchmark: pre-tokenization throughput on the shared Gutenberg sample, 1 vs 2 worker processes.

    python benchmarks/pretokenize_gutenberg.py [--shard-mb 4] [--vocab-size 8192] [--max-workers 2]

Prints MB/s (input text) and tokens/s for the tokenization phase of each run. The BPE is trained
once (timed separately) and then given to every run as a fixed tokenizer.json, so the runs
tokenize identical shards and differ only in the number of worker processes. Each worker is
single-threaded (TOKENIZERS_PARALLELISM=false); "0 workers" = in-process with tokenizers' own
thread pool, for reference. Numbers depend on what else the machine runs at the same time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

GUTENBERG = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus" / "gutenberg"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shard-mb", type=float, default=4.0)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--max-workers", type=int, default=2)
    ap.add_argument("--bpe-train-mb", type=float, default=16.0)
    args = ap.parse_args()
    if not GUTENBERG.is_dir():
        print(f"skipped: {GUTENBERG} is absent")
        return

    from fixedcode_study.data.shards import pretokenize

    files = sorted(GUTENBERG.glob("*.txt"))
    print(f"corpus: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB in {GUTENBERG}")
    print(f"machine: {os.cpu_count()} CPU cores (shared with other processes)")
    work = Path(tempfile.mkdtemp(prefix="bench-pretok-"))
    base = {"name": "gutenberg", "source": "text_files", "paths": [str(GUTENBERG / "*.txt")], "doc_separator": None,
            # name_hash: the split these numbers were measured with (shuffle reads the corpus once more first)
            "vocab_size": args.vocab_size, "val_fraction": 0.05, "split": "name_hash", "split_seed": 0, "shard_mb": args.shard_mb,
            "tokenizer_train_mb": args.bpe_train_mb, "cache_dir": str(work / "cache")}
    try:
        t0 = time.time()
        first = pretokenize({**base, "tokenizer": "bpe"}, work / "bpe", workers=args.max_workers, progress=False)
        print(f"BPE (V={args.vocab_size}, trained on {args.bpe_train_mb:g} MB) + tokenization with "
              f"{args.max_workers} workers: {time.time() - t0:.1f}s total")
        tokenizer = str(work / "bpe" / "tokenizer.json")
        rows = []
        for workers in [0, *range(1, args.max_workers + 1)]:
            m = pretokenize({**base, "tokenizer": tokenizer}, work / f"w{workers}", workers=workers, progress=False)
            assert m["train_tokens"] == first["train_tokens"] and m["val_tokens"] == first["val_tokens"]
            rows.append((workers, m["last_run"]))
        print(f"{len(first['shards'])} shards of <= {args.shard_mb:g} MB; {first['train_tokens'] + first['val_tokens']:,} tokens")
        print(f"{'workers':>8} {'seconds':>8} {'MB/s':>8} {'tokens/s':>12} {'speedup':>8} {'cpu s':>8} {'MB/cpu-s':>9}")
        ref = rows[1][1]["seconds"] if len(rows) > 1 else rows[0][1]["seconds"]
        for workers, run in rows:
            print(f"{workers:>8} {run['seconds']:>8.2f} {run['mb_per_second']:>8.2f} {run['tokens_per_second']:>12,.0f} "
                  f"{ref / run['seconds']:>7.2f}x {run['cpu_seconds']:>8.1f} {run['mb_per_cpu_second']:>9.2f}"
                  + ("   <- in-process, tokenizers' own threads" if workers == 0 else ""))
        print("(seconds = wall time of the tokenization phase incl. worker start-up; speedup relative to 1 worker;\n"
              " cpu s = CPU time of the tokenizing processes, MB/cpu-s = throughput per core actually obtained)")
        try:
            print(f"load average during the runs (1/5/15 min): {os.getloadavg()}")
        except OSError:
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
