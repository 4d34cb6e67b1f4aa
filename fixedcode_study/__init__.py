"""fixedcode-study: does a decoder-only LM need a trainable input embedding table?

The pipeline, one package (or module) per stage, lowest layer first (a module imports only from
its own layer or below; tests/test_layout.py enforces it):

    errors.py, console.py, hardware.py
                   one-line user errors and JobBusy; the terminal (bars, result lines, job logs);
                   CPU facts (bf16 support, the CPU precision resolver)
    config.py      Hydra: conf/ and sweeps/, composition for the front door, job keys
    inputs/        the input interfaces: learned table, binary / GF(2) / wide / Gaussian codes
    model.py       the shared decoder (one readable file)
    accounting.py  parameter groups, optimizer groups, FLOPs per token, training-state bytes
    build.py       the model assembled from its configs
    record/        the job directory, results.json's life cycle, fingerprints, reuse, atomic writes
    data/          corpus -> tokenizer -> token memmaps (cached), shards; the data order and batches
    spec/          the composed config resolved once into one frozen, validated job spec
    evaluation/    lm-evaluation-harness on a checkpoint: adapter, tasks, records
    probing/       representation probes of trained models
    training/      one job: batch plan, LightningModule, resumable checkpoints, loggers
    systems/       benchmarks: meters, the timing loop, the report
    hub/           the Hugging Face bridge: export, import, outside models, generation
    studies/       sweeps of jobs: study presets, grids, costing, the parallel launcher
    analysis/      run directories -> statistics -> tables -> figures -> report.md and dashboard
    cli/           the front door: one thin module per command and the `fixedcode` dispatcher

Commands (`fixedcode <command>` or `python -m fixedcode_study <command>`, cli/__main__.py's COMMANDS
table): run, sweep, describe, evaluate, probe, analyze, regenerate, export, generate, pretokenize, bench,
bench-input, bench-output, eval-tasks, lm-eval. `python -m fixedcode_study.run` (run.py beside this
file) is the study's own command; `python -m analysis` works from a checkout.
"""

__version__ = "0.1.0"
