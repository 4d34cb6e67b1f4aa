"""Training: one job from a composed config to a completed record.

- `job`: `run_job(cfg, job_dir)`: lock, fingerprint check, then train / evaluate / skip (what `run` calls).
- `settings`: every numeric setting validated before work starts.
- `schedule`: when to validate (log-spaced by default: dense early, sparse late).
- `plan`: the global batch split over devices and accumulation, steps, and the run's FLOPs.
- `task`: the LightningModule (loss, validation sums, AdamW + warmup/cosine).
- `resume`: resumable Lightning checkpoints, bitwise continuation, preemption at any phase.
- `loggers`: metrics.csv (long format) and its W&B mirror.
- `console`: what the terminal shows while a job runs (one bar, one result line); library output to <job>/run.log.
- `strategies`: strategies a Hydra yaml cannot spell (FSDP wrapped per decoder block).
"""
