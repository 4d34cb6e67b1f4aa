"""Evaluation: downstream scores of a finished checkpoint through lm-evaluation-harness.

- `harness`: evaluation settings, `evaluate_checkpoint` (runs lm-eval, returns the record that
  results.json["eval"] holds), the W&B view of it.
- `lm`: FixedCodeLM, our checkpoints as an lm-eval model (HFLM-identical request handling; the
  forward pass is the Decoder's own `features` + head).
- `tasks`: task definitions: official tasks on local mirrors, and built-in held-out tasks.
"""
