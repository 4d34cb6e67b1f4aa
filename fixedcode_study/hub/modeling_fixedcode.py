"""A Llama decoder whose input or output head is a fixed code of the token ID: no V x d table there.

This file is copied into every model folder that `fixedcode export` writes with a
fixed-code input (alone, or followed by a trained map shared by every token; or a trained low-rank
V x r table and its map) or a table-free head, and `auto_map` in its config.json points Hugging Face's Auto
classes here, so

    AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)   # FixedCodeLlamaForCausalLM
    AutoModel.from_pretrained(folder, trust_remote_code=True)              # FixedCodeLlamaModel (hidden states)

load the model offline with nothing but torch and transformers (it imports no fixedcode_study
code). The body is exactly LlamaForCausalLM's. Two parts can differ, each described in config.json:

Input (`config.input_code`; absent: LlamaModel's own learned nn.Embedding table). `model.embed_tokens`
is `FixedCodeInput`, which computes the code the workbench trained with (fixedcode_study/inputs/),
then tiles it or feeds it to the input's trained map (`map`, below):

  kind "bits"   bits of the token ID, optionally recoded over GF(2) and shifted:
                  c = ((pi(id) >> i) & 1) for i < id_bits        (id_bits canonical bits, LSB first)
                  y = (M c + b) mod 2                             (M: code_width x id_bits, b: code_width;
                                                                    no M: y = c)
                `matrix` is a list of code_width strings of id_bits '0'/'1' characters (row r, column j =
                character j), `shift` one string of code_width characters, as in the job's gf2_matrix.json.
                  v = y ({0,1}) or 2y - 1 ({-1,+1}), times `scale`
                pi is the identity unless the weights hold `<module>.id_permutation` (V,).
                binary16 is M = none; gf2 is M = A (and b for the affine map); a wide GF(2) code is
                M = [I; A_0; A_1; ...] over the minimal canonical bits.
  kind "table"  a V x K table of code values held in the weights as `<module>.code_values`
                (Gaussian codes, random extra bits, the spelling code, a learned low-dimensional
                table, a learned low-rank table): K is small, so this is still no V x d input tensor.
                A buffer (never trained) unless `trainable` is true: then an nn.Parameter (the
                learned_lowrank table, which goes on training here as it did in the workbench).
                `scale` 1: the table holds the values as they are fed.
Without `map`, the K-vector v is repeated to hidden_size and the last copy truncated (tiling), in
fp32, then cast to the model's dtype, as the workbench does.

  map           optional (`input_code.map`): a trainable map shared by every token, applied to the
                *untiled* fp32 K-vector v (no tiling when a map is present), its weights trained
                nn.Parameters under `<module>.map.` (code_map and learned_lowrank,
                fixedcode_study/inputs/mapped.py):
                  {"kind": "linear"}                                  x = W v
                      W = `map.proj.weight` (hidden_size, K), no bias
                  {"kind": "mlp", "hidden": h, "activation": a}       x = W act(U v + c)
                      U = `map.fc_in.weight` (h, K), c = `map.fc_in.bias` (h,),
                      W = `map.proj.weight` (hidden_size, h), no bias;
                      act = torch.nn.functional.<a>, a in gelu (exact erf form), silu, relu
                v is cast to the map weights' dtype before each layer (the workbench's order: the code
                in fp32, the layers in the weights' dtype). A code_map's code is described as that
                fixed code alone would be (`code_source` names its type; `source` is "code_map").
                learned_lowrank is kind "table" (its V x r table, `trainable` true) with map "linear".
An ID outside [0, vocab_size) is an IndexError, as it is for nn.Embedding (a bit code would
otherwise encode it silently).

Output head (`config.output_head`; absent: LlamaForCausalLM's untied nn.Linear `lm_head`). Its
`code` is described exactly like an input code (the same two kinds, here under `lm_head.`):
  kind "fixed"     logits = C (P h) (fixedcode_study/heads/fixed.py): C the (V, K) code values of
                   every ID, times `scale` (the head's own: match_head makes the mean squared row norm
                   1), never trained; P = `lm_head.proj` (K, hidden_size), trained. No parameter has a
                   dimension of size V.
  kind "bitchain"  log p(v | h) = sum_k free[v, k] log sigmoid(s_k(v) z_k(h, b_<k(v)))
                   (fixedcode_study/heads/bitchain.py), over the code's bits b(v) ({0,1}, `scale` 1):
                     z_k = a_k . h + beta_k + sum_{j<k} s_j (m_kj . h + c_kj),   s_j = 2 b_j - 1
                   a = `lm_head.bit_weight` (K, d), beta = `bit_bias` (K,), m = `pair_weight` (P, d),
                   c = `pair_bias` (P,), the P = K(K-1)/2 pairs (k, j), j < k, in numpy.tril_indices(K, -1)
                   order. free[v, k] = 1 when some valid ID shares v's first k bits and differs at bit k;
                   a forced step (free 0) contributes nothing, so the V IDs' probabilities sum to 1 and
                   the returned logits are already log-probabilities. signs and free are computed here,
                   from the code, on first use.
The bit chain returns fp32 log-probabilities whatever the weights' dtype, as the workbench's does.

config.json says `model_type: llama`, so that tools which only read the config (AutoTokenizer,
AutoConfig without trust_remote_code) treat the folder as the Llama it is apart from its code, and
ask no question about custom code. With a fixed-code input, the weights file holds
`model.embed_tokens.weight` as a (vocab_size, 0) placeholder (`NO_TABLE_PLACEHOLDER`): a plain
LlamaForCausalLM, which is what transformers builds when trust_remote_code is not given, stops at
its shape instead of loading with a randomly initialised input table. A table-free head likewise
has `lm_head.weight` as a (vocab_size, 0) placeholder (`NO_HEAD_PLACEHOLDER`), so a plain Llama stops
there instead of loading with a random V x d head (a learned input alone would not stop it). These
classes ignore both on load and write them back on save.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel, LlamaPreTrainedModel

INPUT_CODE_KINDS = ("bits", "table")
INPUT_MAP_KINDS = ("linear", "mlp")
MAP_ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu}  # gelu: approximate='none', as the workbench's
OUTPUT_HEAD_KINDS = ("fixed", "bitchain")
NO_TABLE_PLACEHOLDER = "embed_tokens.weight"  # a (vocab_size, 0) tensor in the weights file (module docstring)
NO_HEAD_PLACEHOLDER = "lm_head.weight"  # the same for a table-free head


class FixedCodeLlamaConfig(LlamaConfig):
    """LlamaConfig plus `input_code` and `output_head`: the fixed input and the table-free head
    (module docstring); either may be empty (a learned table, the untied head).

    model_type stays "llama" (module docstring: why); `architectures` and `auto_map` name these classes."""

    model_type = "llama"

    def __init__(self, input_code: dict[str, Any] | None = None, output_head: dict[str, Any] | None = None,
                 **kwargs: Any):
        # Each only when given: config.json then names only the parts that differ from a Llama, and an
        # untied-head export's config.json is what it was before heads could be exported.
        if input_code:
            self.input_code = dict(input_code)
        if output_head:
            self.output_head = dict(output_head)
        super().__init__(**kwargs)


def _part(config: Any, name: str) -> dict[str, Any]:
    """config.input_code / config.output_head, {} when the config has none (a learned table, the untied head)."""
    return dict(getattr(config, name, None) or {})


def _bit_rows(value: Any) -> Any:
    """'0110' -> [0, 1, 1, 0]; a list of such strings -> a list of lists; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return [int(ch) for ch in value]
    return [_bit_rows(row) for row in value]


class CodeFromSpec(nn.Module):
    """token IDs (...) -> their fixed code values (..., code_width) in fp32, from a code description
    (module docstring: kinds "bits" and "table"). The input and the table-free heads share it, so a
    head's code is computed by the very lines that compute an input code. No trainable parameter,
    except a "table" code with `trainable` true (an input's learned low-rank table)."""

    def __init__(self, spec: dict[str, Any], vocab_size: int, field: str):
        super().__init__()
        spec = dict(spec)
        self.kind = spec.get("kind")
        if self.kind not in INPUT_CODE_KINDS:
            raise ValueError(f"config.{field}.kind={self.kind!r}: expected one of {INPUT_CODE_KINDS}")
        self.trainable = bool(spec.get("trainable", False))
        if field != "input_code" and (spec.get("map") or self.trainable):
            raise ValueError(f"config.{field}: a head's code is fixed (no `map`, no `trainable` table)")
        if self.trainable and self.kind != "table":
            raise ValueError(f"config.{field}.trainable: only a \"table\" code has values to train")
        self.vocab_size = int(vocab_size)
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
        if self.kind == "table" and self.trainable:
            self.code_values = nn.Parameter(torch.zeros(self.vocab_size, self.code_width))
        elif self.kind == "table":
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

    def all_codes(self) -> torch.Tensor:
        """(vocab_size, code_width) fp32: the code of every ID, on the module's device."""
        return self.code(torch.arange(self.vocab_size, device=self.placement.device))


class InputMap(nn.Module):
    """config.input_code.map (module docstring): the trainable map shared by every token, (..., K)
    fp32 code values -> (..., hidden_size) in the map weights' dtype. `proj` (no bias), and for "mlp"
    `fc_in` (biased) before it: nn.Linear layers, so their weights load as trainable parameters."""

    def __init__(self, spec: dict[str, Any], code_width: int, hidden_size: int):
        super().__init__()
        self.kind = spec.get("kind")
        if self.kind not in INPUT_MAP_KINDS:
            raise ValueError(f"config.input_code.map.kind={self.kind!r}: expected one of {INPUT_MAP_KINDS}")
        if self.kind == "mlp":
            self.activation = spec.get("activation", "gelu")
            if self.activation not in MAP_ACTIVATIONS:
                raise ValueError(f"config.input_code.map.activation={self.activation!r}: expected one of "
                                 f"{tuple(MAP_ACTIVATIONS)}")
            hidden = int(spec["hidden"])
            self.fc_in = nn.Linear(code_width, hidden, bias=True)
            self.proj = nn.Linear(hidden, hidden_size, bias=False)
        else:
            self.activation = None
            self.proj = nn.Linear(code_width, hidden_size, bias=False)

    def forward(self, code: torch.Tensor) -> torch.Tensor:
        if self.kind == "mlp":  # the workbench's order: cast to the layer's dtype, then the layer
            code = MAP_ACTIVATIONS[self.activation](self.fc_in(code.to(self.fc_in.weight.dtype)))  # (..., h)
        return self.proj(code.to(self.proj.weight.dtype))  # (..., hidden_size)


class FixedCodeInput(CodeFromSpec):
    """token IDs (B, T) -> input vectors (B, T, hidden_size) in the model's dtype: the fixed code tiled,
    or, with `map`, the untiled code through the trainable map (module docstring). No trainable
    parameter without a map (or a `trainable` table)."""

    def __init__(self, config: FixedCodeLlamaConfig):
        spec = _part(config, "input_code")
        super().__init__(spec, config.vocab_size, "input_code")
        self.hidden_size = int(config.hidden_size)
        if spec.get("map"):
            self.map = InputMap(dict(spec["map"]), self.code_width, self.hidden_size)
        else:
            self.map = None

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        code = self.code(input_ids)  # (B, T, K), fp32
        if self.map is not None:  # the untiled K-vector through the map, in the weights' dtype
            return self.map(code).to(self.placement.dtype)
        reps = math.ceil(self.hidden_size / self.code_width)
        tiled = code.repeat(*([1] * (code.dim() - 1)), reps)[..., : self.hidden_size]  # (B, T, hidden)
        # tiled in fp32, then cast to the weights' dtype (bf16 loads), as the workbench does
        return tiled.to(self.placement.dtype)

    @property
    def weight(self) -> torch.Tensor:
        """The (vocab_size, hidden_size) matrix of input vectors, row i = what the model feeds for ID i.

        For tools that read `get_input_embeddings().weight`. It is computed anew on each access from the
        code (and the map's current weights, when there is a map): no stored V x d tensor, requires_grad
        False, so changing it changes nothing (train the map's parameters, `map.*`, instead)."""
        with torch.no_grad():
            return self(torch.arange(self.vocab_size, device=self.placement.device))


class FixedCodeHead(CodeFromSpec):
    """logits = C (P h): C the fixed (V, K) code (module docstring), P = `proj` (K, hidden_size) trained.

    C is computed from the code on first use (per device) rather than stored: for a bit code the
    folder then holds no V-sized output tensor at all, and the values are the input code's own lines
    (export verifies them against the workbench head's C bit for bit). A Gaussian C is a "table"
    code: its values are in the weights (`lm_head.code_values`) and used as they are."""

    def __init__(self, config: FixedCodeLlamaConfig):
        super().__init__(_part(config, "output_head")["code"], config.vocab_size, "output_head.code")
        self.proj = nn.Parameter(torch.empty(self.code_width, int(config.hidden_size)))
        self._matrices: dict[torch.device, torch.Tensor] = {}

    def code_matrix(self) -> torch.Tensor:
        """C (V, K), fp32. A table code reads the loaded buffer each time (nothing to go stale)."""
        if self.kind == "table":
            return self.all_codes()
        device = self.placement.device
        if device not in self._matrices:
            with torch.no_grad():
                self._matrices[device] = self.all_codes()
        return self._matrices[device]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        code = self.code_matrix().to(self.proj.dtype)  # the weights' dtype, as the workbench's buffer follows it
        return F.linear(F.linear(hidden_states, self.proj), code)  # (..., d) -> (..., K) -> (..., V)


class BitChainHead(CodeFromSpec):
    """The bit chain over the code's bits: full log-probabilities (..., V) (module docstring).

    The same operations in the same order as fixedcode_study/heads/bitchain.py's forward, so the
    numbers agree to float rounding. signs (V, K), free (V, K), the pair indices and the (P, K)
    pair-to-bit map are computed from the code on first use (per device): constants, not weights."""

    # (positions x V x K) fp32 elements per step of the full evaluation: the (..., V, K) bit logits
    # of a long sequence would otherwise be materialised at once (a 2,048-token context at V = 49,152,
    # K = 16 is 6 GiB). Every position is computed on its own, so chunking changes no number.
    CHUNK_ELEMENTS = 1 << 25

    def __init__(self, config: FixedCodeLlamaConfig):
        super().__init__(_part(config, "output_head")["code"], config.vocab_size, "output_head.code")
        if self.values != "01" or self.scale != 1.0:
            raise ValueError("config.output_head.code of a bit chain must give the bits themselves "
                             "(values '01', scale 1)")
        K, d = self.code_width, int(config.hidden_size)
        P = K * (K - 1) // 2
        self.bit_weight = nn.Parameter(torch.empty(K, d))   # a (K, d)
        self.bit_bias = nn.Parameter(torch.empty(K))        # beta (K,)
        self.pair_weight = nn.Parameter(torch.empty(P, d))  # m (P, d)
        self.pair_bias = nn.Parameter(torch.empty(P))       # c (P,)
        self._tables: dict[torch.device, tuple[torch.Tensor, ...]] = {}

    def chain_tables(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(signs (V, K), free (V, K), pair_j (P,), pair_to_bit (P, K)), fp32 / int64, on the module's device."""
        device = self.placement.device
        if device not in self._tables:
            with torch.no_grad():
                bits = self.all_codes().to(torch.int64)  # (V, K) in {0, 1}
            V, K = bits.shape
            free = torch.zeros(V, K, dtype=torch.bool, device=device)
            prefix = torch.zeros(V, dtype=torch.int64, device=device)
            for k in range(K):
                prefix = prefix | (bits[:, k] << k)  # v's bits 0..k as one integer
                known = torch.unique(prefix)  # the valid prefixes of length k + 1
                free[:, k] = torch.isin(prefix ^ (1 << k), known)  # the other branch continues a valid ID
            pair_k, pair_j = np.tril_indices(K, k=-1)  # the P pairs j < k, row by row
            P = len(pair_k)
            pair_to_bit = torch.zeros(P, K, dtype=torch.float32, device=device)
            pair_to_bit[torch.arange(P, device=device), torch.from_numpy(pair_k.astype(np.int64)).to(device)] = 1.0
            self._tables[device] = (2.0 * bits.float() - 1.0, free.float(),
                                    torch.from_numpy(pair_j.astype(np.int64)).to(device), pair_to_bit)
        return self._tables[device]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        signs, free, pair_j, pair_to_bit = self.chain_tables()
        u = F.linear(hidden_states, self.bit_weight).float() + self.bit_bias.float()  # (..., K)
        g = F.linear(hidden_states, self.pair_weight).float() + self.pair_bias.float()  # (..., P)
        pair_signs = signs[:, pair_j]  # (V, P)
        lead = u.shape[:-1]
        u, g = u.reshape(-1, u.shape[-1]), g.reshape(-1, g.shape[-1])
        step = max(1, self.CHUNK_ELEMENTS // (self.vocab_size * self.code_width))
        out = []
        for start in range(0, u.shape[0], step):
            uc, gc = u[start:start + step], g[start:start + step]
            # z[n, v, k] = u_k + sum_p signs[v, j_p] g_p [k_p = k]: one (V, P) x (n, P, K) product
            z = uc.unsqueeze(-2) + pair_signs @ (gc.unsqueeze(-1) * pair_to_bit)  # (n, V, K)
            out.append((free * F.logsigmoid(signs * z)).sum(dim=-1))  # (n, V)
        return torch.cat(out).reshape(*lead, self.vocab_size)


OUTPUT_HEADS = {"fixed": FixedCodeHead, "bitchain": BitChainHead}


def output_head(config: FixedCodeLlamaConfig) -> nn.Module:
    """The lm_head config.output_head describes; LlamaForCausalLM's untied nn.Linear when it is empty."""
    spec = _part(config, "output_head")
    if not spec:
        return nn.Linear(config.hidden_size, config.vocab_size, bias=False)
    if spec.get("kind") not in OUTPUT_HEADS:
        raise ValueError(f"config.output_head.kind={spec.get('kind')!r}: expected one of {OUTPUT_HEAD_KINDS}")
    return OUTPUT_HEADS[spec["kind"]](config)


class _NoTables:
    """Save and load the (vocab_size, 0) placeholders at the input table's and the head's names
    (module docstring): the input's when it is a fixed code (a learned input keeps its table under
    that name), the head's when it is table-free."""

    _keys_to_ignore_on_load_unexpected = [r"embed_tokens\.weight$", r"^lm_head\.weight$"]

    def save_pretrained(self, save_directory: Any, *args: Any, state_dict: dict[str, torch.Tensor] | None = None,
                        **kwargs: Any):
        state_dict = dict(self.state_dict() if state_dict is None else state_dict)
        causal = isinstance(self, FixedCodeLlamaForCausalLM)
        if _part(self.config, "input_code"):
            state_dict[("model." if causal else "") + NO_TABLE_PLACEHOLDER] = torch.zeros(self.config.vocab_size, 0)
        if causal and _part(self.config, "output_head"):
            state_dict[NO_HEAD_PLACEHOLDER] = torch.zeros(self.config.vocab_size, 0)
        return super().save_pretrained(save_directory, *args, state_dict=state_dict, **kwargs)

    def resize_token_embeddings(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("a fixed code is defined for its vocabulary only; it cannot be resized")


class FixedCodeLlamaModel(_NoTables, LlamaModel):
    """LlamaModel with `embed_tokens` = FixedCodeInput (unless config.input_code is empty: a learned
    table): the base model (hidden states), for AutoModel."""

    config_class = FixedCodeLlamaConfig

    def __init__(self, config: FixedCodeLlamaConfig):
        super().__init__(config)
        if _part(config, "input_code"):
            self.embed_tokens = FixedCodeInput(config)  # replaces the (V, d) nn.Embedding LlamaModel made

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                **kwargs: Any):
        if inputs_embeds is None and input_ids is not None:
            inputs_embeds, input_ids = self.embed_tokens(input_ids), None
        return super().forward(input_ids=input_ids, inputs_embeds=inputs_embeds, **kwargs)


class FixedCodeLlamaForCausalLM(_NoTables, LlamaForCausalLM):
    """LlamaForCausalLM on FixedCodeLlamaModel, with the head config.output_head describes (untied
    nn.Linear, a fixed code or the bit chain): never tied."""

    config_class = FixedCodeLlamaConfig
    _tied_weights_keys: dict[str, str] = {}  # nothing to tie: no input table, or a head that is no table

    def __init__(self, config: FixedCodeLlamaConfig):
        if getattr(config, "tie_word_embeddings", False):
            raise ValueError("a fixed-code model has no input table or no head table to tie: tie_word_embeddings=false"
                             " (a tied model with a learned input is a plain LlamaForCausalLM)")
        # LlamaForCausalLM.__init__'s own lines with our base model, rather than building a LlamaModel to
        # throw away: one body in memory when the model is built outside from_pretrained (the export).
        LlamaPreTrainedModel.__init__(self, config)
        self.model = FixedCodeLlamaModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = output_head(config)
        self.post_init()
