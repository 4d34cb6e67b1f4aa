"""Meeting Hugging Face tools: export a workbench checkpoint as a transformers folder (export.py,
card.py, and modeling_fixedcode.py, the file a fixed-code folder loads with trust_remote_code),
and load an outside causal LM for evaluation and probing (external.py)."""
