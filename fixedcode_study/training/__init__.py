"""Training: one job from its resolved spec (spec.JobSpec) to a completed record.

- `job`: `run_job(spec_or_cfg, job_dir)`: lock, fingerprint check, then train / evaluate / skip (what `run` calls).
- `schedule`: the callback that validates at the spec's validation steps.
- `plan`: the batch plan, re-exported from spec/plan.py for older imports.
- `speed`: CPU threads and torch.compile, carried out as the spec decided them; the compiled loss.
- `task`: the LightningModule (loss, validation sums, AdamW + warmup/cosine).
- `breakdown`: the buckets of the final validation's loss breakdown (target frequency, code weight, position).
- `resume`: resumable Lightning checkpoints, bitwise continuation, preemption at any phase.
- `loggers`: metrics.csv (long format) and its W&B mirror.
- `strategies`: strategies a Hydra yaml cannot spell (FSDP wrapped per decoder block).
"""
