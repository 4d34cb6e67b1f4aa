"""Turn run directories (or W&B runs) of the fixed-code input study into tables, figures and a report.

    python -m analysis RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--baseline NAME] [--pairs A:B[,C:D]]
                       [--margin METRIC=VALUE ...] [--reference] [--ema-alpha 0.1]
    python -m analysis --wandb ENTITY/PROJECT [--group G] --out REPORT_DIR

Writes REPORT_DIR/report.md, tables/{main_results,eval_results,comparisons,tuned_lr,
matrix_seed_variance,code_properties,probes_identity,probes_geometry,probes_cka,params,reference,
excluded_jobs}.{md,tex,csv} (each when it
applies), tables/jobs.csv (one row per job: every number the tables summarise) and
figures/*.{png,pdf}. The run-directory contract is docs/results-schema.md.

Modules, by job:
- reading: load (discover + read -> frames), wandb_source (W&B public API), variants (row labels,
  arm families and order), grouping (contexts, metric sets);
- statistics: metricinfo (direction and scale of a metric), stats (summaries, paired/Welch t,
  effect sizes, Holm), pairing (which runs pair: seed + common random numbers), equivalence
  (margins, TOST, verdicts), comparisons (which arms against which, the Holm family), variance
  (matrix vs seed components), tuning (best learning rate per arm), probes (probes.json and
  probes_cross.json of `python -m fixedcode_study.probe`, fresh ones only);
- tables: tables (summaries, parameters, excluded jobs), tables_eval (+ reference rows, from
  reference), tables_compare, tables_tuned, tables_variance, tables_code, tables_probes; render (Markdown,
  LaTeX, CSV), numfmt (precision);
- figures: figstyle (palette, styles, legends), figures (curves), figures_gap (gap vs tokens and
  vs model size), figures_summary (eval bars, sweep axes), figures_tuned (tuning curve),
  figures_probes (probe layer curves, CKA heatmaps, probes over training);
- report (report.md and its methods section).
"""
