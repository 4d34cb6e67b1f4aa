"""Shared test helpers (imported as `helpers.<name>`; tests/ is on sys.path under pytest).

- `analysis`: synthetic run directories for the analysis tests.
- `cli`: run `python -m fixedcode_study.run ...` in this process (exit code, stdout, stderr).
- `distributed`: run the CLI in a subprocess, signal it, read its job directory.
- `eval`: tiny trained and untrained checkpoints, built once per pytest process.
- `pretokenize`: small corpora on disk in every supported format.
"""
