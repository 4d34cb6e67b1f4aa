"""Reading: run directories, W&B runs, outside models, probes and samples -> pandas frames.

runs.py      discover job directories and read results.json / metrics.csv into a Study
records.py   fields of one record: display paths, lm-eval metric rows, common random numbers
wandb.py     the same frames from W&B's public API
external.py  outside models evaluated with `fixedcode evaluate hf=...` (reference rows)
probes.py    probes.json / probes_cross.json (fresh ones only); samples.py: samples.json
variants.py  the row label of a job (input plus the input properties that vary)
breakdown.py the final validation loss per bucket (results.json val_breakdown) as rows
ladder.py    model shapes and token budgets as comparison contexts (a compute ladder)
declared.py  a study's primary comparisons (sweeps/<study>.yaml `primary`, study=, primary=)
compose.py   compose.json records of pairs of the study's jobs (`fixedcode compose`) and their measures
"""
