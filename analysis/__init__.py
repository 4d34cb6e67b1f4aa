"""Turn run directories (or W&B runs) of the fixed-code input study into tables, figures and a report.

    python -m analysis RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--reference] [--ema-alpha 0.1]
    python -m analysis --wandb ENTITY/PROJECT [--group G] --out REPORT_DIR

Writes REPORT_DIR/report.md, tables/{main_results,diff_vs_learned,params,reference,excluded_jobs}
.{md,tex,csv}, tables/jobs.csv (one row per job: every number the tables summarise) and
figures/*.{png,pdf}. The run-directory contract is docs/results-schema.md.

Modules: load (discover + read -> frames), variants (row labels), stats (summaries, Welch),
numfmt (precision), tables / render (build / write tables), figstyle, figures (curves),
figures_summary (eval bars, sweep axes), report (report.md), wandb_source (W&B public API).
"""
