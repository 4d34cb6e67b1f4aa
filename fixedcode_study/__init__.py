"""fixedcode-study: does a decoder-only LM need a trainable input embedding table?

The pipeline, one package (or module) per stage:

    config.py      Hydra: conf/ and sweeps/, composition for every entry point, job keys
    data/          corpus -> tokenizer -> token memmaps (cached); the data order and batches
    inputs/        the input interfaces: learned table, binary / GF(2) / wide / Gaussian codes
    model.py       the shared decoder (one readable file); build.py assembles it from configs
    accounting.py  parameter groups, optimizer groups, FLOPs per token, training-state bytes
    training/      one job: batch plan, LightningModule, resumable checkpoints, loggers
    record/        the job directory, results.json's life cycle, final checkpoints, atomic writes
    evaluation/    lm-evaluation-harness on a checkpoint: adapter, tasks, records
    systems/       benchmarks and the Hugging Face bridge
    analysis/      (a sibling package) results -> tables, figures, report

Command-line entry points are the top-level modules `run`, `sweep`, `describe`, `evaluate`,
`pretokenize`, `bench`, `bench_input`, `eval_tasks` and `lm_eval_model` (python -m
fixedcode_study.<name>, or the fixedcode-<name> scripts).
"""

__version__ = "0.1.0"
