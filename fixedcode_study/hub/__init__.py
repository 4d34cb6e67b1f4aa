"""Meeting Hugging Face tools: export a workbench checkpoint as a transformers folder (export.py,
card.py, and modeling_fixedcode.py, the file a folder with a fixed-code input or a table-free head
loads with trust_remote_code),
load an outside causal LM for evaluation and probing (external.py), read one of our exports back
as the workbench model it came from (imported.py), and resolve whatever a command is given where a
model is read: a job, its checkpoints/final folder or an export (source.py)."""
