"""Systems: what the study's variants cost to run, and the bridge to Hugging Face.

- `bench`: training speed (through the same Lightning task and optimizer as `run`), memory,
  checkpoint size and MFU per input variant, against HF LlamaForCausalLM; it puts together
  `fit` (one timed Trainer.fit of one model), `timing` (settings, pass order, memory pass, jobs
  side by side), `meters` (peak FLOP/s, peak memory, state and checkpoint bytes) and
  `bench_report` (rows, MFU, ratios, tables).
- `bench_input`: the input layer alone at paper width.
- `bench_output`: each output head alone at paper width, and the whole model per head (training
  through `fit`, greedy generation), every ratio against the untied head.
- `hf`: our Decoder as a LlamaForCausalLM with the same weights (parity tests, the reference).

Every entry takes composed configs: the commands (cli/bench.py, cli/bench_input.py, cli/bench_output.py) compose them.
"""
