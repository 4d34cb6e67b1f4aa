"""Training: one job from its resolved spec (spec.JobSpec) to a completed record.

- `job`: `run_job(spec, job_dir)`: the job's life under its lock (what `run` calls): decide, then
  train / finish / reuse / skip, save, evaluate the trained model in memory, finish the record.
- `decide`: what a job does next, from its spec and what its directory holds (stale jobs refused).
- `procedure`: the training procedure: seed, model, data, trainer, fit, final validation.
- `recorder`: results.json and its W&B mirror, written by one writer at the life's boundaries.
- `schedule`: the callback that validates at the spec's validation steps.
- `speed`: CPU threads and torch.compile, carried out as the spec decided them; the compiled loss.
- `task`: the LightningModule (loss, validation sums, AdamW + warmup/cosine).
- `breakdown`: the buckets of the final validation's loss breakdown (target frequency, code weight, position).
- `resume`: resumable Lightning checkpoints (the fingerprint and the spec inside), bitwise continuation,
  preemption at any phase.
- `loggers`: metrics.csv (long format) and its W&B mirror.
- `strategies`: strategies a Hydra yaml cannot spell (FSDP wrapped per decoder block).
"""
