"""Evaluation: downstream scores of a finished checkpoint through lm-evaluation-harness.

- `harness`: `evaluate_model` (runs lm-eval on a model in memory, with validated settings,
  spec.evaluation.EvalSpec; returns the record that results.json["eval"] holds),
  `evaluate_checkpoint` (the same on a checkpoint it loads), the W&B view of it.
- `lm`: FixedCodeLM, our checkpoints as an lm-eval model (HFLM-identical request handling; the
  forward pass is the Decoder's own `features` + head).
- `tasks`: task definitions: official tasks on local mirrors, and built-in held-out tasks.
"""
