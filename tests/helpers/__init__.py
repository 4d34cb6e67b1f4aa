"""Shared test helpers (imported as `helpers.<name>`; tests/ is on sys.path under pytest).

- `analysis`: synthetic run directories for the analysis tests.
- `cli`: run `python -m fixedcode_study.run ...` or `fixedcode <verb> ...` in this process (exit code, stdout, stderr).
- `distributed`: run the CLI in a subprocess, signal it, read its job directory.
- `eval`: tiny trained and untrained checkpoints, built once per pytest process.
- `pretokenize`: small corpora on disk in every supported format.
"""

# The held-out split of a test job: 0.6% of the corpus (~5 scenes, ~17k tokens at V=512) instead of
# data/shakespeare.yaml's 3% (~80k tokens). A test job trains on 2-33k tokens, so validating the full
# split (val_points passes plus the final one) was about half of every job's time (profiled); every
# test that shares this value shares one prepared corpus per session.
SMALL_VAL = "data.val_fraction=0.006"
