"""Shared fixtures for the evaluation tests: tiny trained checkpoints, trained once per pytest process."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from . import SMALL_VAL

SHARED_EVAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "eval"

_ROOT = Path(tempfile.mkdtemp(prefix="fixedcode-eval-tests-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


@functools.cache
def trained_checkpoint(input_name: str = "learned", output_name: str = "untied") -> tuple[Path, Path]:
    """(checkpoint dir, prepared data root) of a test_micro model trained for a few steps."""
    from fixedcode_study.data.prepare import prepare
    from fixedcode_study.config import compose as compose_config
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.training.job import run_job

    cfg = compose_config([
        "model=test_micro", "logger=csv", f"input={input_name}", f"output={output_name}", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
        SMALL_VAL, f"data.cache_dir={_ROOT / 'cache'}", f"out_root={_ROOT / 'out'}",
    ])
    job_dir = _ROOT / "out" / (input_name if output_name == "untied" else f"{input_name}+{output_name}")
    record = run_job(JobSpec.from_cfg(cfg), job_dir).record
    assert record["status"] == "completed"
    return job_dir / record["checkpoint"], prepare(cfg.data, progress=False).root


def mirror_available(*tasks: str) -> bool:
    return all((SHARED_EVAL / t).is_dir() for t in tasks)


@functools.cache
def untrained_checkpoint(input_name: str, seed: int = 0, max_seq_len: int | None = None,
                         output_name: str = "untied", randomised: bool = False, overrides: tuple[str, ...] = ()) -> Path:
    """A freshly initialised test_micro checkpoint with another input interface or output head (same
    tokenizer as trained_checkpoint): for checks that only need the code path, not a trained model.
    overrides: further config overrides (e.g. output.code=wide), part of the folder's name.

    randomised: every parameter redrawn away from its init (norms 1 + 0.3 N(0, 1), matrices N(0, 0.08^2),
    biases N(0, 0.5^2); seeded), so that a weight mapped to the wrong place, a norm or a bias that
    starts at 1 or 0 included, moves the logits well past a 1e-5 tolerance."""
    import torch

    from fixedcode_study.build import build_decoder
    from fixedcode_study.config import compose as compose_config
    from fixedcode_study.record.checkpoint import save_checkpoint
    from fixedcode_study.spec import JobSpec

    _, prepared_root = trained_checkpoint("learned")
    spec = JobSpec.from_cfg(compose_config(["model=test_micro", f"input={input_name}", f"output={output_name}",
                                            *([f"model.max_seq_len={max_seq_len}"] if max_seq_len else []), *overrides]))
    model = build_decoder(spec.model, seed=seed)
    if randomised:
        g = torch.Generator().manual_seed(1000 + seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 2:
                    p.copy_(0.08 * torch.randn(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.copy_(0.5 * torch.randn(p.shape, generator=g))
                else:  # RMSNorm weights
                    p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
    name = (f"{input_name}-{seed}-{max_seq_len}" + ("" if output_name == "untied" else f"-{output_name}")
            + "".join(f"-{o.replace('=', '_').replace('.', '_')}" for o in overrides))
    return save_checkpoint(_ROOT / "untrained" / (name + ("-randomised" if randomised else "")), model,
                           spec.checkpoint_config(), prepared_root / "tokenizer.json")


def weight_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} over every safetensors file of an export folder, read without loading."""
    from safetensors import safe_open

    shapes = {}
    for f in Path(folder).glob("*.safetensors"):
        with safe_open(str(f), framework="pt") as st:
            shapes.update({k: tuple(st.get_slice(k).get_shape()) for k in st.keys()})
    return shapes
