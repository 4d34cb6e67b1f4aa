"""A workbench checkpoint as a Hugging Face model folder.

    export_checkpoint("outputs/multirun/main/input=gf2,seed=1/checkpoints/final", "exports/gf2-s1")

The folder holds model.safetensors, config.json, generation_config.json, the tokenizer
(tokenizer.json + tokenizer_config.json, end-of-text as bos/eos/pad) and a model card (README.md,
card.py). The two kinds:
- learned input (a V x d table) with the untied or the tied head: a plain `LlamaForCausalLM`
  (tied: `tie_word_embeddings=True`, the table under both names), loadable without remote code;
- every other model (a fixed-code input, a code with a trained map, a low-rank table, or a
  table-free head: fixed, bitchain): `FixedCodeLlamaForCausalLM` from modeling_fixedcode.py, copied
  into the folder and named in config.json's `auto_map` (with its base model for AutoModel), so
  `trust_remote_code=True` loads it offline. Its weights hold no (V, d) input tensor; the input code
  is described in config.json (`input_code`), the head in `output_head` (its code described the
  same way, `head_code_spec`). Which input becomes which description (`input_code_spec`):
    binary, binary16, gf2, wide gf2 (permuted or not)     kind "bits"
    gaussian, wide random extra bits, spelling            kind "table": the (V, K) scaled code values
    learned_lowdim                                        kind "table": the trained V x K table (a buffer)
    code_map (`map: linear | mlp`)                        the fixed code it reads, described as above,
                                                          plus `map`: its trained weights under
                                                          `model.embed_tokens.map.` (proj, fc_in)
    learned_lowrank                                       kind "table" holding the trained V x r table
                                                          (`trainable`: an nn.Parameter in the
                                                          folder's model) plus `map: linear` (proj)
  A code with a map is fed to the map untiled (K coordinates), as the workbench does.
  config.json says `model_type: llama`, so AutoTokenizer loads the tokenizer with no remote code and
  no prompt (modeling_fixedcode.py's docstring: why, and the guard that keeps a plain Llama from
  loading the weights).
generation_config.json sets the special tokens only: no max_length, so `generate(max_new_tokens=...)`
is not told that both were set, and the defaults are transformers' own for any Llama.
Checked, not assumed: before the folder is renamed into place, it is loaded back through
transformers' Auto classes and its logits must equal the workbench model's (`verify`), and every
constant the modeling file computes (the input code, a fixed head's C, the bit chain's signs and
free steps) must equal the workbench model's bit for bit; so must the input vector of every ID
(with a map: the map's output, the same fp32 operations on the same weights).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..data.tokenizer import end_of_text_id
from ..errors import ConfigError
from ..inputs import LearnedEmbedding
from ..model import Decoder, require_gated_mlp
from ..heads import BitChainHead, FixedCodeHead, TiedHead, is_default_output
from ..record.atomic import atomic_dir, plain_modes
from ..record.checkpoint import EXPORT_META, Checkpoint, load_checkpoint  # EXPORT_META: config.json key naming the source
from ..record.jobdir import JobDir
from ..systems.hf import hf_llama_config, hf_state_dict
from . import modeling_fixedcode
from .card import model_card
from .codes import head_code_spec, input_code_spec
from .source import checkpoint_folder

MODELING_FILE = Path(modeling_fixedcode.__file__).name  # modeling_fixedcode.py
VERIFY_ATOL = 1e-5


@dataclass
class Exported:
    path: Path
    architecture: str           # LlamaForCausalLM | FixedCodeLlamaForCausalLM
    input_tensors: dict[str, tuple[int, ...]]  # every model.embed_tokens.* tensor written (not the empty placeholder)
    max_abs_logit_diff: float | None
    head: str = "untied"        # the output head's type (outputs/: untied, tied, fixed, bitchain)
    head_tensors: dict[str, tuple[int, ...]] | None = None  # every lm_head.* tensor written (not the placeholder)


def hf_model(model: Decoder):
    """The transformers model (fp32, eval) computing what `model` computes, input and head included."""
    from transformers import LlamaForCausalLM

    require_gated_mlp(model.config, "the Hugging Face conversion (export, generate)",
                      "evaluate a GELU checkpoint with `fixedcode evaluate`, which runs the workbench model itself")
    spec, buffers = input_code_spec(model.input)
    head_spec, head_buffers = head_code_spec(model.head)
    if isinstance(model.head, TiedHead) and spec is not None:  # outputs/ refuses it at build; said again here
        raise ConfigError("checkpoint", "a tied head needs a learned input table", "export an untied model")
    base = hf_llama_config(model)
    state = hf_state_dict(model)
    if spec is None and head_spec is None:
        hf = LlamaForCausalLM(base)
    else:
        config = modeling_fixedcode.FixedCodeLlamaConfig(input_code=spec, output_head=head_spec, **base.to_dict())
        config.architectures = ["FixedCodeLlamaForCausalLM"]
        hf = modeling_fixedcode.FixedCodeLlamaForCausalLM(config)
        if spec is not None:
            del state["model.embed_tokens.weight"]  # the materialised (V, d) table is exactly what is not exported
            state.update({f"model.embed_tokens.{k}": v for k, v in buffers.items()})
        state.update({f"lm_head.{k}": v for k, v in head_buffers.items()})
    hf.config.update({"bos_token_id": None, "eos_token_id": None, "pad_token_id": None})  # set by export
    missing, unexpected = hf.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    if missing or unexpected:
        raise RuntimeError(f"export mapping mismatch: missing={missing[:3]} unexpected={unexpected[:3]}")
    return hf.eval()


def write_tokenizer(ckpt: Checkpoint, out: Path) -> int:
    """tokenizer.json + tokenizer_config.json for AutoTokenizer; returns the end-of-text id."""
    from transformers import PreTrainedTokenizerFast

    eot = end_of_text_id(ckpt.tokenizer, (ckpt.config.get("data") or {}).get("eot_token"), field="checkpoint")
    token = ckpt.tokenizer.id_to_token(eot)
    # bos = eos = pad = end-of-text: what the workbench conditions an empty context on, so lm-eval's
    # HFLM (prefix token = bos) scores exactly as the workbench adapter does.
    tok = PreTrainedTokenizerFast(tokenizer_object=ckpt.tokenizer, bos_token=token, eos_token=token,
                                  pad_token=token, model_max_length=ckpt.model.config.max_seq_len)
    tok.save_pretrained(str(out))
    return eot


def verify_export(folder: Path, model: Decoder, trust_remote_code: bool) -> float:
    """Load the folder as a user would and compare logits with the workbench model: max |diff|."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=trust_remote_code,
                                                  dtype=torch.float32).eval()
    c = model.config
    T = min(c.max_seq_len, 32)
    ids = torch.randint(0, c.vocab_size, (2, T), generator=torch.Generator().manual_seed(0))
    ids[0, :2] = torch.tensor([0, c.vocab_size - 1])  # both ends of the vocabulary
    device = model.norm.weight.device
    with torch.no_grad():
        ours = model(ids.to(device)).float().cpu()
        theirs = loaded(ids).logits.float()
    diff = float((ours - theirs).abs().max())
    _verify_head(loaded, model)
    if not isinstance(model.input, LearnedEmbedding):  # the code itself, every ID, bit for bit
        with torch.no_grad():
            for start in range(0, c.vocab_size, 4096):
                chunk = torch.arange(start, min(start + 4096, c.vocab_size))[None]
                if not torch.equal(model.input(chunk.to(device)).float().cpu(), loaded.model.embed_tokens(chunk)):
                    raise RuntimeError(f"the exported input code differs from the workbench's for some ID in "
                                       f"[{start}, {start + chunk.shape[1]}); nothing was written")
    if not diff <= VERIFY_ATOL:
        raise RuntimeError(f"the exported model's logits differ from the workbench model's by {diff:.3g} "
                           f"(> {VERIFY_ATOL}); nothing was written")
    return diff


def _verify_head(loaded: Any, model: Decoder) -> None:
    """The head's constants as the loaded folder computes them equal the workbench model's bit for
    bit, and a tied folder really is tied (one tensor under both names)."""
    head, theirs = model.head, loaded.lm_head
    with torch.no_grad():
        if isinstance(head, TiedHead):
            if theirs.weight.data_ptr() != loaded.model.embed_tokens.weight.data_ptr():
                raise RuntimeError("the exported tied model loads with an lm_head separate from its input table; "
                                   "nothing was written")
            checks = {}
        elif isinstance(head, FixedCodeHead):
            checks = {"code C": (head.code.float().cpu(), theirs.code_matrix().float())}
        elif isinstance(head, BitChainHead):
            signs, free, pair_j, pair_to_bit = theirs.chain_tables()
            checks = {"signs": (head.signs.cpu(), signs), "free steps": (head.free.cpu(), free),
                      "pair indices": (head.pair_j.cpu(), pair_j), "pair-to-bit map": (head.pair_to_bit.cpu(), pair_to_bit)}
        else:
            checks = {}
    for what, (ours, exported) in checks.items():
        if ours.shape != exported.shape or not torch.equal(ours, exported.to(ours.dtype)):
            raise RuntimeError(f"the exported {head.kind} head's {what} differs from the workbench's; nothing was written")


def export_checkpoint(checkpoint: str | os.PathLike, out: str | os.PathLike, verify: bool = True,
                      overwrite: bool = False) -> Exported:
    from transformers import GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" / "Loading weights" bars for a folder we check ourselves
    # one rule for every checkpoint= (hub/source.py): a job directory, a final checkpoint folder, or an export
    checkpoint = checkpoint_folder(checkpoint, "export the job directory it came from")
    out = Path(out).expanduser()
    if out.exists() and not overwrite:
        raise ConfigError("out", f"{out} already exists", "pick a new folder or pass overwrite=true")
    ckpt = load_checkpoint(checkpoint)
    model = ckpt.model.float().eval()
    hf = hf_model(model)
    # remote code: a fixed-code input, or a head LlamaForCausalLM does not have
    fixed = type(hf).__name__ == "FixedCodeLlamaForCausalLM"
    job = JobDir.of_final_checkpoint(checkpoint)
    record = job.read_results() if job else None
    output_cfg = ckpt.config.get("output")
    hf.config.update({EXPORT_META: {
        "checkpoint": str(checkpoint.resolve()), "input": ckpt.config.get("input", {}).get("name"),
        "input_type": model.input.kind, "seed": ckpt.config.get("seed"), "study": ckpt.config.get("sweep"),
        "fingerprint": ckpt.config.get("fingerprint"),
        "status": (record or {}).get("status"),
        "model_spec": ckpt.spec_note,  # built from the checkpoint's stored spec, or reconstructed (format 1)
        # what hub/imported.py rebuilds the workbench model from (the probes read our own modules)
        "model_config": ckpt.config.get("model"), "input_config": ckpt.config.get("input"),
        # the head, for any but the untied default (absent: untied, as in every export before the axis)
        **({} if is_default_output(output_cfg) else {
            "output": output_cfg.get("name"), "output_type": model.head.kind, "output_config": output_cfg}),
    }})
    with atomic_dir(out) as tmp:
        eot = write_tokenizer(ckpt, tmp)
        hf.config.update({"bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot})
        # No max_length: a saved one makes every generate(max_new_tokens=...) warn that both are set. The
        # context (max_position_embeddings) is in config.json; past it, generate behaves as for any Llama.
        hf.generation_config = GenerationConfig(bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)
        if fixed:
            stem = Path(MODELING_FILE).stem
            hf.config.auto_map = {"AutoConfig": f"{stem}.FixedCodeLlamaConfig",
                                  "AutoModel": f"{stem}.FixedCodeLlamaModel",
                                  "AutoModelForCausalLM": f"{stem}.FixedCodeLlamaForCausalLM"}
        hf.save_pretrained(str(tmp))
        if fixed:
            shutil.copyfile(modeling_fixedcode.__file__, tmp / MODELING_FILE)
        (tmp / "README.md").write_text(model_card(ckpt, record, job, hf.config))
        plain_modes(tmp)  # others sharing the folder can read it, as every record file (docs/record.md)
        diff = verify_export(tmp, model, trust_remote_code=fixed) if verify else None
        written = _tensors(tmp, "model.embed_tokens.")
        head_written = _tensors(tmp, "lm_head.")
    return Exported(out, hf.config.architectures[0], written, diff, model.head.kind, head_written)


def _tensors(folder: Path, prefix: str) -> dict[str, tuple[int, ...]]:
    """{name: shape} of every tensor under `prefix` in the folder's weights (not the (V, 0) placeholder)."""
    from safetensors import safe_open

    shapes = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                shape = tuple(st.get_slice(key).get_shape())
                if key.startswith(prefix) and 0 not in shape:
                    shapes[key] = shape
    return shapes
