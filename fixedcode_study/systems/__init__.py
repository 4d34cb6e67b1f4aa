"""Systems: what the study's variants cost to run, and the bridge to Hugging Face.

- `bench`: training speed (through the same Lightning task and optimizer as `run`), memory,
  checkpoint size and MFU per input variant, against HF LlamaForCausalLM.
- `bench_input`: the input layer alone at paper width.
- `hf`: our Decoder as a LlamaForCausalLM with the same weights (parity tests, the reference).
"""
