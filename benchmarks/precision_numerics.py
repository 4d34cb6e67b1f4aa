"""Do two studies of the same jobs agree within seed noise? (e.g. fp32 vs bf16-mixed, eager vs compiled)

    python benchmarks/precision_numerics.py REFERENCE_STUDY OTHER_STUDY [--labels fp32 bf16]

Each argument is a directory holding job directories (results.json + metrics.csv), such as
outputs/multirun/main. Jobs are matched by (model, input, seed). For every input variant it prints:

  final val_ppl    mean +- sd over seeds in each study
  paired diff      val_loss(other) - val_loss(reference), per seed: mean and sd (nats)
  seed sd          the sd of val_loss over seeds in the reference study: the noise the study's
                   questions are asked against
  |diff| / seed sd the verdict number: below 1 the setting moves the result by less than a change
                   of seed does
  curve            the largest |mean difference| / seed sd over the validation points after the
                   first 5% of training (early points are dominated by the warm-up, where every run
                   is at the unigram loss), and at which training tokens

Nothing is trained here: it reads what two runs of `python -m fixedcode_study.run -m ...` wrote.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(root: Path) -> dict[tuple[str, str, int], dict]:
    """(model, input, seed) -> {"val_loss", "val_ppl", "curve": {tokens: val/loss}} of completed jobs."""
    jobs = {}
    for results in sorted(root.rglob("results.json")):
        record = json.loads(results.read_text())
        if record.get("status") != "completed":
            continue
        curve = {}
        metrics = results.parent / "metrics.csv"
        if metrics.exists():
            with open(metrics, newline="") as fh:
                for row in csv.DictReader(fh):
                    if row["metric"] == "val/loss" and row["tokens"]:
                        curve[int(float(row["tokens"]))] = float(row["value"])
        key = (record["model"], record["input"], int(record["seed"]))
        jobs[key] = {"val_loss": record["final"]["val_loss"], "val_ppl": record["final"]["val_ppl"],
                     "curve": curve, "runtime": record.get("runtime") or {"precision": "(not recorded)"}}
    return jobs


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def compare(ref: dict, other: dict) -> list[dict]:
    groups = defaultdict(list)
    for key in sorted(set(ref) & set(other)):
        groups[key[:2]].append(key)
    rows = []
    for (model, variant), keys in sorted(groups.items()):
        a = [ref[k]["val_loss"] for k in keys]
        b = [other[k]["val_loss"] for k in keys]
        diffs = [y - x for x, y in zip(a, b)]
        seed_sd = sd(a)
        worst, at = 0.0, None
        common = sorted(set.intersection(*(set(ref[k]["curve"]) & set(other[k]["curve"]) for k in keys)))
        last = common[-1] if common else 0
        for tokens in common:
            if tokens < 0.05 * last:
                continue
            ca = [ref[k]["curve"][tokens] for k in keys]
            cb = [other[k]["curve"][tokens] for k in keys]
            noise = sd(ca)
            gap = abs(statistics.mean(cb) - statistics.mean(ca)) / noise if noise > 0 else float("inf")
            if gap > worst:
                worst, at = gap, tokens
        rows.append({
            "model": model, "input": variant, "seeds": [k[2] for k in keys],
            "ref_ppl": [ref[k]["val_ppl"] for k in keys], "other_ppl": [other[k]["val_ppl"] for k in keys],
            "diff_mean": statistics.mean(diffs), "diff_sd": sd(diffs), "seed_sd": seed_sd,
            "ratio": abs(statistics.mean(diffs)) / seed_sd if seed_sd > 0 else float("inf"),
            "curve_ratio": worst, "curve_at_tokens": at,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("reference", type=Path)
    p.add_argument("other", type=Path)
    p.add_argument("--labels", nargs=2, default=None, help="names of the two studies (default: their precisions)")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    ref, other = load(args.reference), load(args.other)
    if not set(ref) & set(other):
        print("error: the two studies have no (model, input, seed) in common", file=sys.stderr)
        return 2
    labels = args.labels or [next(iter(d.values()))["runtime"].get("precision", "?") for d in (ref, other)]
    rows = compare(ref, other)
    print(f"reference: {args.reference} ({labels[0]}); other: {args.other} ({labels[1]})")
    head = (f"{'model':<9} {'input':<10} {'seeds':>5} {labels[0] + ' val_ppl':>18} {labels[1] + ' val_ppl':>18} "
            f"{'paired diff (nats)':>20} {'seed sd':>8} {'|diff|/sd':>9} {'curve max':>9} {'at tokens':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        def ppl(values: list[float]) -> str:
            return f"{statistics.mean(values):.1f} +- {sd(values):.1f}"
        print(f"{r['model']:<9} {r['input']:<10} {len(r['seeds']):>5} {ppl(r['ref_ppl']):>18} {ppl(r['other_ppl']):>18} "
              f"{r['diff_mean']:>+10.4f} +- {r['diff_sd']:.4f} {r['seed_sd']:>8.4f} {r['ratio']:>9.2f} "
              f"{r['curve_ratio']:>9.2f} {r['curve_at_tokens'] or 0:>10,}")
    within = all(r["ratio"] < 1 for r in rows)
    print(f"verdict: every variant's mean paired difference is {'below' if within else 'NOT below'} its seed sd")
    if args.json:
        args.json.write_text(json.dumps({"labels": labels, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
