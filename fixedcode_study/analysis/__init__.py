"""Turn run directories (or W&B runs) of the fixed-code input study into tables, figures and a report.

    fixedcode analyze RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--baseline NAME] [--pairs A:B[,C:D]]
                      [--margin METRIC=VALUE ...] [--reference] [--ema-alpha 0.1]
    fixedcode analyze --wandb ENTITY/PROJECT [--group G] --out REPORT_DIR

Writes REPORT_DIR/report.md, tables/{main_results,eval_results,comparisons,tuned_lr,
matrix_seed_variance,code_properties,probes_identity,probes_geometry,probes_cka,params,reference,
excluded_jobs}.{md,tex,csv} (each when it
applies), tables/jobs.csv (one row per job: every number the tables summarise) and
figures/*.{png,pdf}. The run-directory contract is docs/results-schema.md. (`python -m analysis`
in a checkout and `python -m fixedcode_study.analysis` are the same command.)

Layers (a module imports only from layers before its own; tests/test_layout.py checks it):
errors -> read/ (run directories, W&B, outside models, probes, samples) -> stats/ (summaries,
pairing, TOST, Holm, variance, tuning) -> tables/ -> figures/ -> report.py (report.md) ->
dashboard.py (the W&B workspace) -> __main__.py (`fixedcode analyze`). Each subpackage's
docstring lists its modules.
"""
