"""The record: what a job leaves behind, written so it can be trusted.

- `jobdir`: a job directory's layout (every file name), its lock, and results.json's life cycle.
- `checkpoint`: final weights as safetensors + config (the job's resolved spec among it) + tokenizer;
  `load_checkpoint` rebuilds the model from the stored spec alone (never from conf/) and returns it
  with its tokenizer and the job's data settings.
- `atomic`: the one atomic, durable writer every record file goes through.
- `reuse`: never train the same job twice: a completed job of another study with the same fingerprint
  is hard-linked into a new job directory instead of being retrained.
"""
