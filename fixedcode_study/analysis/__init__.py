"""Turn run directories (or W&B runs) of the fixed-code input study into tables, figures and a report.

    fixedcode analyze RUN_DIR [RUN_DIR ...] out=REPORT_DIR [baseline=NAME] [pairs=A:B[,C:D]]
                      [primary=A:B[,C:D]] [study=FILE.yaml] [margin=METRIC=VALUE ...]
                      [min_bucket_tokens=N] [note=TEXT] [reference=true] [ema_alpha=0.1]
    fixedcode analyze wandb=ENTITY/PROJECT [group=G] out=REPORT_DIR
    fixedcode regenerate [STUDY ...] [summaries=true] [check=true] [copy_from=SRC ...]

Writes REPORT_DIR/report.md (its first screen: the study's question, the primary comparisons with
their verdicts and their figure), tables/{primary,arms,main_results,eval_results,comparisons,readings,
tuned_lr,matrix_seed_variance,code_properties,output_heads,params,reference,loss_breakdown*,
loss_profile*,scaling_*,probes_*,composition_*,excluded_jobs}.{md,tex,csv} (each when it applies), tables/jobs.csv (one row per
job: every number the tables summarise) and figures/*.{png,pdf}, every file atomically. The
run-directory contract is docs/results-schema.md; the primary comparisons are declared in the
study's file (sweeps/README.md). (`python -m analysis` in a checkout is the same command.)

Layers (a module imports only from layers before its own; tests/test_layout.py checks it):
errors -> read/ (run directories, W&B, outside models, probes, samples, declarations) -> stats/
(summaries, pairing, TOST, Holm, families, variance, tuning, breakdown) -> tables/ -> results/
(every estimate of a report, computed once) -> figures/ (draw what they are given) -> sections/
(report.md's sections, each from the results) -> report.py (report.md) -> dashboard.py (the W&B
workspace) -> entry.py (what `fixedcode analyze`, cli/analyze.py, is asked and runs) -> summaries.py (the
generated blocks of README.md and docs/, and the lint for findings written outside them) -> regenerate.py
(every committed report from its committed records, then the blocks; `fixedcode regenerate`). Each
subpackage's docstring lists its modules.
"""
