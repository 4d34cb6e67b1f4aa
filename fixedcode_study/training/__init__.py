"""Training: one job from a composed config to a completed record.

- `job`: `train_job(cfg, job_dir)`, the steps of one job in order (what `run` calls per job).
- `plan`: the global batch split over devices and accumulation, steps, and the run's FLOPs.
- `task`: the LightningModule (loss, validation sums, AdamW + warmup/cosine).
- `resume`: resumable Lightning checkpoints, bitwise continuation, preemption by signal.
- `loggers`: metrics.csv (long format) and Weights & Biases.
- `strategies`: strategies a Hydra yaml cannot spell (FSDP wrapped per decoder block).
"""
