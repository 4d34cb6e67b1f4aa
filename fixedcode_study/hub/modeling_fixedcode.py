"""A Llama decoder whose input is a fixed code computed from the token ID: no V x d input table.

This file is copied into every fixed-code model folder that `python -m fixedcode_study.export`
writes, and `auto_map` in its config.json points Hugging Face's Auto classes here, so

    AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)   # FixedCodeLlamaForCausalLM
    AutoModel.from_pretrained(folder, trust_remote_code=True)              # FixedCodeLlamaModel (hidden states)

load the model offline with nothing but torch and transformers (it imports no fixedcode_study
code). The body and the untied head are exactly LlamaForCausalLM's; only `model.embed_tokens` is
replaced by `FixedCodeInput`, which computes the code the workbench trained with
(fixedcode_study/inputs/), described by `config.input_code`:

  kind "bits"   bits of the token ID, optionally recoded over GF(2) and shifted:
                  c = ((pi(id) >> i) & 1) for i < id_bits        (id_bits canonical bits, LSB first)
                  y = (M c + b) mod 2                             (M: code_width x id_bits, b: code_width;
                                                                    no M: y = c)
                `matrix` is a list of code_width strings of id_bits '0'/'1' characters (row r, column j =
                character j), `shift` one string of code_width characters, as in the job's gf2_matrix.json.
                  v = y ({0,1}) or 2y - 1 ({-1,+1}), times `scale`
                pi is the identity unless the weights hold `model.embed_tokens.id_permutation` (V,).
                binary16 is M = none; gf2 is M = A (and b for the affine map); a wide GF(2) code is
                M = [I; A_0; A_1; ...] over the minimal canonical bits.
  kind "table"  a V x K table of code values held in the weights as `model.embed_tokens.code_values`
                (Gaussian codes, random extra bits, a learned low-dimensional table): K is small, so
                this is still no V x d input tensor.
Either way the K-vector v is repeated to hidden_size and the last copy truncated (tiling), in fp32,
then cast to the model's dtype, as the workbench does. An ID outside [0, vocab_size) is an
IndexError, as it is for nn.Embedding (a bit code would otherwise encode it silently).

config.json says `model_type: llama`, so that tools which only read the config (AutoTokenizer,
AutoConfig without trust_remote_code) treat the folder as the Llama it is apart from its input, and
ask no question about custom code. The weights file holds `model.embed_tokens.weight` as a
(vocab_size, 0) placeholder (`NO_TABLE_PLACEHOLDER`): a plain LlamaForCausalLM, which is what
transformers builds when trust_remote_code is not given, stops at its shape instead of loading with
a randomly initialised input table. These classes ignore it on load and write it back on save.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel, LlamaPreTrainedModel

INPUT_CODE_KINDS = ("bits", "table")
NO_TABLE_PLACEHOLDER = "embed_tokens.weight"  # a (vocab_size, 0) tensor in the weights file (module docstring)


class FixedCodeLlamaConfig(LlamaConfig):
    """LlamaConfig plus `input_code`: the description of the fixed input (module docstring).

    model_type stays "llama" (module docstring: why); `architectures` and `auto_map` name these classes."""

    model_type = "llama"

    def __init__(self, input_code: dict[str, Any] | None = None, **kwargs: Any):
        self.input_code = dict(input_code or {})
        super().__init__(**kwargs)


def _bit_rows(value: Any) -> Any:
    """'0110' -> [0, 1, 1, 0]; a list of such strings -> a list of lists; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return [int(ch) for ch in value]
    return [_bit_rows(row) for row in value]


class FixedCodeInput(nn.Module):
    """token IDs (B, T) -> tiled fixed code (B, T, hidden_size) in the model's dtype. No trainable parameter."""

    def __init__(self, config: FixedCodeLlamaConfig):
        super().__init__()
        spec = dict(config.input_code)
        self.kind = spec.get("kind")
        if self.kind not in INPUT_CODE_KINDS:
            raise ValueError(f"config.input_code.kind={self.kind!r}: expected one of {INPUT_CODE_KINDS}")
        self.vocab_size, self.hidden_size = int(config.vocab_size), int(config.hidden_size)
        self.code_width = int(spec["code_width"])
        self.values = spec.get("values", "01")
        self.scale = float(spec.get("scale", 1.0))
        # Plain Python data, not buffers: small, and rebuilt on the right device on first use
        # (a buffer made here would be garbage under the meta-device init from_pretrained uses).
        self.id_bits = int(spec.get("id_bits", self.code_width))
        self.matrix = _bit_rows(spec.get("matrix"))  # code_width rows of id_bits 0/1 entries, or None
        self.shift = _bit_rows(spec.get("shift"))    # code_width 0/1 entries, or None
        self._constants: dict[torch.device, tuple[torch.Tensor, ...]] = {}
        # An empty buffer: it holds no values (so meta-device init cannot spoil it), only the device and
        # dtype the model was moved to, which the output and `weight` follow, as nn.Embedding's do.
        self.register_buffer("placement", torch.empty(0), persistent=False)
        if spec.get("permuted"):
            self.register_buffer("id_permutation", torch.zeros(self.vocab_size, dtype=torch.int64))
        if self.kind == "table":
            self.register_buffer("code_values", torch.zeros(self.vocab_size, self.code_width))

    def _device_constants(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        if device not in self._constants:
            shifts = torch.arange(self.id_bits, dtype=torch.int64, device=device)
            matrix = (torch.tensor(self.matrix, dtype=torch.float32, device=device) if self.matrix is not None
                      else None)
            shift = torch.tensor(self.shift, dtype=torch.float32, device=device) if self.shift is not None else None
            self._constants[device] = (shifts, matrix, shift)
        return self._constants[device]

    def _check_ids(self, input_ids: torch.Tensor) -> None:
        """IDs outside [0, vocab_size) are an error, as in nn.Embedding, not a silently encoded integer."""
        if input_ids.numel() == 0:
            return
        if input_ids.device.type == "cpu":  # one reduction, no device sync to pay: a clear message
            low, high = (int(v) for v in torch.aminmax(input_ids))
            if low < 0 or high >= self.vocab_size:
                bad = high if high >= self.vocab_size else low
                raise IndexError(f"token id {bad} is out of range for this model's vocabulary of {self.vocab_size} "
                                 f"(valid ids: 0..{self.vocab_size - 1})")
        else:  # an accelerator: a device-side assert (no host sync per step), as nn.Embedding does there
            torch._assert_async(((input_ids >= 0) & (input_ids < self.vocab_size)).all(),
                                f"token id out of range for this model's vocabulary of {self.vocab_size}")

    def code(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(...) IDs -> (..., code_width) fp32 code values, scaled."""
        self._check_ids(input_ids)
        if self.kind == "table":
            values = self.code_values[input_ids].float()
        else:
            shifts, matrix, shift = self._device_constants(input_ids.device)
            ids = self.id_permutation[input_ids] if hasattr(self, "id_permutation") else input_ids
            bits = ((ids.unsqueeze(-1) >> shifts) & 1).float()  # (..., id_bits)
            if matrix is not None:  # integer sums <= id_bits are exact in fp32; then mod 2
                bits = torch.remainder(bits @ matrix.T + (shift if shift is not None else 0.0), 2.0)
            values = bits if self.values == "01" else 2.0 * bits - 1.0
        return values * self.scale if self.scale != 1.0 else values

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        code = self.code(input_ids)  # (B, T, K), fp32
        reps = math.ceil(self.hidden_size / self.code_width)
        tiled = code.repeat(*([1] * (code.dim() - 1)), reps)[..., : self.hidden_size]  # (B, T, hidden)
        # tiled in fp32, then cast to the weights' dtype (bf16 loads), as the workbench does
        return tiled.to(self.placement.dtype)

    @property
    def weight(self) -> torch.Tensor:
        """The (vocab_size, hidden_size) matrix of input vectors, row i = what the model feeds for ID i.

        For tools that read `get_input_embeddings().weight`. It is fixed: computed anew on each access
        from the code (no stored V x d tensor, requires_grad False), so changing it changes nothing."""
        with torch.no_grad():
            return self(torch.arange(self.vocab_size, device=self.placement.device))


class _NoInputTable:
    """Save and load the (vocab_size, 0) placeholder at the input table's name (module docstring)."""

    _keys_to_ignore_on_load_unexpected = [r"embed_tokens\.weight$"]

    def save_pretrained(self, save_directory: Any, *args: Any, state_dict: dict[str, torch.Tensor] | None = None,
                        **kwargs: Any):
        state_dict = dict(self.state_dict() if state_dict is None else state_dict)
        prefix = "model." if isinstance(self, FixedCodeLlamaForCausalLM) else ""
        state_dict[prefix + NO_TABLE_PLACEHOLDER] = torch.zeros(self.config.vocab_size, 0)
        return super().save_pretrained(save_directory, *args, state_dict=state_dict, **kwargs)

    def resize_token_embeddings(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("a fixed code is defined for its vocabulary only; it cannot be resized")


class FixedCodeLlamaModel(_NoInputTable, LlamaModel):
    """LlamaModel with `embed_tokens` = FixedCodeInput: the base model (hidden states), for AutoModel."""

    config_class = FixedCodeLlamaConfig

    def __init__(self, config: FixedCodeLlamaConfig):
        super().__init__(config)
        self.embed_tokens = FixedCodeInput(config)  # replaces the (V, d) nn.Embedding LlamaModel made

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                **kwargs: Any):
        if inputs_embeds is None and input_ids is not None:
            inputs_embeds, input_ids = self.embed_tokens(input_ids), None
        return super().forward(input_ids=input_ids, inputs_embeds=inputs_embeds, **kwargs)


class FixedCodeLlamaForCausalLM(_NoInputTable, LlamaForCausalLM):
    """LlamaForCausalLM on FixedCodeLlamaModel; the head stays untied."""

    config_class = FixedCodeLlamaConfig
    _tied_weights_keys: dict[str, str] = {}  # nothing to tie: there is no input table

    def __init__(self, config: FixedCodeLlamaConfig):
        if getattr(config, "tie_word_embeddings", False):
            raise ValueError("a fixed-code model has no input table to tie the head to: tie_word_embeddings=false")
        # LlamaForCausalLM.__init__'s own lines with our base model, rather than building a LlamaModel to
        # throw away: one body in memory when the model is built outside from_pretrained (the export).
        LlamaPreTrainedModel.__init__(self, config)
        self.model = FixedCodeLlamaModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()
