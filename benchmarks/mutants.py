"""Planted mutants: how many hand-planted bugs in the core numerics and statistics a test selection kills.

    python benchmarks/mutants.py --list                       # the mutants, each checked to apply at --rev
    python benchmarks/mutants.py --rev <commit> --json /tmp/m.json
    python benchmarks/mutants.py --only in-bit-shift --tests tests/inputs/test_codes.py --workers 0

Each mutant below is one realistic bug (off-by-one, wrong sign or tail, swapped argument, dropped
term, xor for or, ...) in the inputs, the heads, model.py, the statistics or the fingerprint: an
exact text that occurs once in its file and its replacement. The script checks out the committed
tree of --rev (default HEAD) as a detached git worktree beside the repo (so `../shared` resolves as
in the repo itself), then for each mutant patches the file, runs pytest there on the tests of the
mutant's area (AREA_TESTS, or --tests for all), and restores the file. pytest exit 1 = killed,
0 = survived, anything else = error; past --timeout-s = timeout. Run it on an old and a new commit
to see what a change to the test suite bought. The worktree is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AREA_TESTS = {  # source path prefix -> the tests that run against its mutants
    "fixedcode_study/inputs/": ["tests/inputs"],
    "fixedcode_study/heads/": ["tests/heads"],
    "fixedcode_study/model.py": ["tests/model"],
    "fixedcode_study/analysis/stats/": ["tests/analysis"],
    "fixedcode_study/record/": ["tests/record"],
}
IN, HD, ST = "fixedcode_study/inputs/", "fixedcode_study/heads/", "fixedcode_study/analysis/stats/"
MODEL, FP = "fixedcode_study/model.py", "fixedcode_study/record/fingerprint.py"

# (id, path, original text (exactly once in the file), replacement, why it matters)
MUTANTS = [
    ("in-bit-shift", IN + "binary.py", "(idx.unsqueeze(-1) >> self.bit_shifts)",
     "(idx.unsqueeze(-1) >> (self.bit_shifts + 1))", "bit i reads bit i+1: bit 0 is lost, ID pairs share a code"),
    ("in-width-pow2", IN + "binary.py", "vocab_size > 2**width:", "vocab_size >= 2**width:",
     "refuses V = 2^K, which K bits encode exactly"),
    ("in-gf2-transpose", IN + "binary.py", "@ self.gf2_matrix.T + self.gf2_shift", "@ self.gf2_matrix + self.gf2_shift",
     "computes A^T c, not the recorded A c"),
    ("in-gf2-no-shift", IN + "binary.py", "@ self.gf2_matrix.T + self.gf2_shift", "@ self.gf2_matrix.T",
     "affine code drops the xor b"),
    ("in-gf2-rank-or", IN + "gf2.py", "m[r] ^= m[rank]", "m[r] |= m[rank]",
     "elimination ORs rows: singular matrices count as full rank"),
    ("in-gf2-colweight", IN + "gf2.py", "if a.sum(axis=1).min() < min_weight or a.sum(axis=0).min() < min_weight:",
     "if a.sum(axis=1).min() < min_weight or a.sum(axis=1).min() < min_weight:",
     "min column weight never checked (rows checked twice)"),
    ("in-gf2-feasible", IN + "gf2.py", "        return k == 1", "        return True",
     "min_weight = K deemed feasible (all-ones rows are rank 1)"),
    ("in-minimal-width", IN + "tiling.py", "(vocab_size - 1).bit_length()", "vocab_size.bit_length()",
     "ceil(log2 V) one too big at powers of two"),
    ("in-tile-floor", IN + "tiling.py", "reps = math.ceil(d_model / k)", "reps = d_model // k",
     "tiling falls short of d_model when K does not divide it"),
    ("in-match-init-swap", IN + "base.py", "self._scale_value = self.reference_std / rms",
     "self._scale_value = rms / self.reference_std", "scale=match_init inverted"),
    ("in-code-stats-mean", IN + "learned.py", "weight.copy_(mean + std * unit)", "weight.copy_(std * unit)",
     "init=code_stats loses the code's per-coordinate mean"),
    ("in-mlp-bias-count", IN + "mapped.py", "k * h + h + h * d_model", "k * h + h * d_model",
     "code_map mlp parameter count omits the hidden bias"),
    ("hd-untied-stream", HD + "linear.py", "init_normal_(self.weight, std, generator)",
     "init_normal_(self.weight, std, None)", "untied head drawn from the global RNG, not the head stream (CRN)"),
    ("hd-untied-tokspec", HD + "linear.py",
     "def token_specific(cls, settings, vocab_size, d_model, code_width) -> int:\n        return vocab_size * d_model",
     "def token_specific(cls, settings, vocab_size, d_model, code_width) -> int:\n        return 0",
     "untied head's V x d weight not counted as token-specific"),
    ("hd-tied-frozen", HD + "linear.py", 'if kind != "learned" or not trainable:', 'if kind != "learned":',
     "output=tied accepted on a frozen table"),
    ("hd-fixed-scale", HD + "fixed.py", "self.scale = 1.0 / math.sqrt(mean_row_norm2)",
     "self.scale = 1.0 / mean_row_norm2", "match_head scales by 1/|c|^2, not 1/|c|"),
    ("hd-chain-xor", HD + "bitchain.py", "np.isin(prefix ^ (1 << k), known", "np.isin(prefix | (1 << k), known",
     "sibling prefix by or: a forced step on a 1 bit counts as a choice, p no longer sums to 1"),
    ("hd-chain-nll-free", HD + "bitchain.py", "return -(free * F.logsigmoid(signs * z)).sum(dim=-1)",
     "return -F.logsigmoid(signs * z).sum(dim=-1)", "teacher-forced NLL charges the forced steps too"),
    ("hd-chain-pairs", HD + "bitchain.py", "pair_k, pair_j = np.tril_indices(K, k=-1)",
     "pair_j, pair_k = np.tril_indices(K, k=-1)", "bit k conditions on later bits: not a distribution"),
    ("md-rope-freq", MODEL, "torch.arange(0, head_dim, 2, dtype=torch.float32)",
     "torch.arange(1, head_dim, 2, dtype=torch.float32)", "RoPE frequencies off by one exponent (HF parity)"),
    ("md-rope-sign", MODEL, "rotated = torch.cat([-x2, x1], dim=-1)", "rotated = torch.cat([x2, -x1], dim=-1)",
     "rotate-half with the wrong sign: rotation runs backwards"),
    ("md-layernorm", MODEL, "F.rms_norm(x.float(),", "F.layer_norm(x.float(),",
     "RMSNorm replaced by LayerNorm (mean subtracted)"),
    ("md-swiglu-swap", MODEL, "F.silu(gate) * up", "F.silu(up) * gate", "gate and up halves swapped"),
    ("md-not-causal", MODEL, "is_causal=True, enable_gqa=gqa)\n\n\n", "is_causal=False, enable_gqa=gqa)\n\n\n",
     "attention sees future tokens"),
    ("md-no-attn-residual", MODEL, "x = x + self.attn(self.attn_norm(x), cos, sin)",
     "x = self.attn(self.attn_norm(x), cos, sin)", "attention residual dropped"),
    ("md-max-seq-len", MODEL, "if T > self.config.max_seq_len:", "if T >= self.config.max_seq_len:",
     "a full-length sequence refused"),
    ("md-nll-inputs", MODEL, "return self.head.nll(self.features(idx), targets)",
     "return self.head.nll(self.features(idx), idx)", "teacher-forced loss scored against the inputs"),
    ("st-paired-ddof", ST + "core.py", "sd = float(d.std(ddof=1))", "sd = float(d.std(ddof=0))",
     "paired sd with ddof=0: CI too narrow, d_z too large"),
    ("st-dz-se", ST + "core.py", "d_z = delta / sd", "d_z = delta / se", "d_z divides by the se, not the sd"),
    ("st-welch-dof", ST + "core.py", "va**2 / (na - 1) + vb**2 / (nb - 1)", "va**2 / (na + 1) + vb**2 / (nb + 1)",
     "Welch-Satterthwaite with n+1 denominators"),
    ("st-hedges-j", ST + "core.py", "j = 1.0 - 3.0 / (4.0 * dof - 1.0)", "j = 1.0 - 3.0 / (4.0 * dof - 9.0)",
     "Hedges' J mixes the dof and N forms"),
    ("st-holm-multiplier", ST + "core.py", "np.arange(len(idx), 0, -1))", "np.arange(len(idx) - 1, -1, -1))",
     "Holm multipliers m-1..0 instead of m..1"),
    ("st-holm-monotone", ST + "core.py", "np.maximum.accumulate(p[idx][order] * np.arange(len(idx), 0, -1))",
     "(p[idx][order] * np.arange(len(idx), 0, -1))", "Holm adjusted p's not made monotone"),
    ("st-tost-min", ST + "equivalence.py", "return float(max(p_lower, p_upper))",
     "return float(min(p_lower, p_upper))", "TOST p is the min of the one-sided p's"),
    ("st-margin-log", ST + "equivalence.py", "return math.log1p(self.value) if self.relative else self.value",
     "return self.value", "relative margin not taken to the log scale"),
    ("st-power-one-sided", ST + "power.py", "crit = sps.t.isf(alpha / 2, dof)", "crit = sps.t.isf(alpha, dof)",
     "difference power uses a one-sided critical value"),
    ("st-tost-power-half", ST + "power.py", "crit = float(sps.t.isf(alpha, dof))",
     "crit = float(sps.t.isf(alpha / 2, dof))", "TOST power tests each side at alpha/2"),
    ("fp-no-inputs-code", FP, '"accounting.py", "inputs", "heads"', '"accounting.py", "heads"',
     "editing a code's source no longer changes the fingerprint"),
    ("fp-ignore-prefix", FP, 'return any(key == p or key.startswith(p + ".") for p in ignore)',
     "return any(key.startswith(p) for p in ignore)",
     "an ignored key also ignores every key it prefixes (`eval` drops `evaluator`)"),
    ("fp-sha-no-code", FP, '"sha": sha({"settings": settings_sha, "code": code})',
     '"sha": sha({"settings": settings_sha})', "the overall sha ignores the code hash"),
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def tests_for(path: str) -> list[str]:
    return next(tests for prefix, tests in AREA_TESTS.items() if path.startswith(prefix))


def problems(mutants, read) -> list[str]:
    """One line per mutant whose original text does not occur exactly once (read(path) -> text)."""
    out = []
    for mid, path, old, new, _ in mutants:
        try:
            count = read(path).count(old)
        except (OSError, subprocess.CalledProcessError):
            out.append(f"{mid}: {path}: no such file")
            continue
        if count != 1 or old == new:
            out.append(f"{mid}: {path}: original text found {count} times" if count != 1 else f"{mid}: no change")
    return out


def run_pytest(cmd: list[str], cwd: Path, env: dict, timeout: float) -> tuple[str, int | None, str]:
    """(result, exit code, output tail). The run gets its own process group, killed whole on timeout/Ctrl-C."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except BaseException as exc:  # timeout or Ctrl-C: pytest and its xdist workers go together
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        return "timeout", None, out[-3000:]
    return {0: "survived", 1: "killed"}.get(proc.returncode, "error"), proc.returncode, out[-3000:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--rev", default="HEAD", help="commit whose tree (code and tests) is mutated")
    ap.add_argument("--tests", help="comma-separated test paths for every mutant (default: AREA_TESTS)")
    ap.add_argument("--workers", type=int, default=2, help="pytest -n (0: one process)")
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="list the mutants and check they apply; run nothing")
    ap.add_argument("--json", type=Path, help="write every result here")
    args = ap.parse_args()
    repo = Path(git(args.repo, "rev-parse", "--show-toplevel").strip())
    rev = git(repo, "rev-parse", "--verify", f"{args.rev}^{{commit}}").strip()
    mutants = MUTANTS
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {m[0] for m in MUTANTS})
        if unknown:
            sys.exit(f"unknown mutant id(s): {', '.join(unknown)}")
        mutants = [m for m in MUTANTS if m[0] in wanted]
    bad = problems(mutants, lambda path: git(repo, "show", f"{rev}:{path}"))
    if args.list:
        for mid, path, _, _, note in mutants:
            print(f"{mid:20} {path.removeprefix('fixedcode_study/'):30} {note}")
        print(f"{len(mutants)} mutants at {rev[:10]}: " + ("all apply" if not bad else f"{len(bad)} do not apply"))
        for line in bad:
            print(line)
        return 1 if bad else 0
    if bad:
        sys.exit("refusing: mutants that do not apply at " + rev[:10] + ":\n" + "\n".join(bad))

    work = repo.parent / f".mutants-{os.getpid()}"  # a sibling, so ../shared is the repo's own
    scratch = Path(tempfile.mkdtemp(prefix="mutants-"))
    path_env = os.pathsep.join(p for p in (str(work), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path_env,
           "PYTHONDONTWRITEBYTECODE": "1"}  # no stale .pyc of a same-size edit in the same second
    results = []
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` cleans up as Ctrl-C does
    git(repo, "worktree", "add", "--detach", str(work), rev)
    try:
        probe = "import fixedcode_study as f, fixedcode_study.config as c; print(f.__file__); print(c.CONFIG_DIR)"
        seen = subprocess.run([sys.executable, "-c", probe], cwd=work, env=env, check=True,
                              capture_output=True, text=True).stdout.split()
        if not all(Path(p).resolve().is_relative_to(work.resolve()) for p in seen):
            sys.exit(f"the worktree's package is not the one imported: {seen}")
        print(f"{len(mutants)} mutants at {rev[:10]} in {work} (imports {seen[0]})", flush=True)
        for mid, path, old, new, note in mutants:
            tests = args.tests.split(",") if args.tests else tests_for(path)
            target = work / path
            original = target.read_text()
            target.write_text(original.replace(old, new, 1))
            cmd = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                   "-n", str(args.workers), f"--basetemp={scratch / mid}"]
            start = time.monotonic()
            try:
                result, code, tail = run_pytest(cmd, work, env, args.timeout_s)
            finally:
                target.write_text(original)
            seconds = time.monotonic() - start
            results.append({"id": mid, "path": path, "note": note, "tests": tests, "result": result,
                            "exit_code": code, "seconds": round(seconds, 1), "output_tail": tail})
            print(f"{mid:20} {result:9} {seconds:7.1f} s" + (f"  (pytest exit {code})" if result == "error" else ""),
                  flush=True)
    except KeyboardInterrupt:
        print("interrupted: reporting the mutants that finished", file=sys.stderr)
    finally:
        if subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(work)]).returncode:
            shutil.rmtree(work, ignore_errors=True)
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"])
        shutil.rmtree(scratch, ignore_errors=True)

    count = {r: sum(x["result"] == r for x in results) for r in ("killed", "survived", "error", "timeout")}
    print(f"killed {count['killed']} of {len(results)} (survived {count['survived']}, errors {count['error']}, "
          f"timeouts {count['timeout']})")
    for r in results:
        if r["result"] == "survived":
            print(f"  survived {r['id']}: {r['note']}")
    if args.json:
        args.json.write_text(json.dumps({"repo": str(repo), "rev": rev, "tests": args.tests, "workers": args.workers,
                                         "summary": count, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
