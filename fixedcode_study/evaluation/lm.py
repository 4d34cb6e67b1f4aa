"""Our checkpoints as an lm-evaluation-harness model, registered as `fixedcode`.

    from .lm import FixedCodeLM
    lm = FixedCodeLM(checkpoint="outputs/runs/main/defaults/checkpoints/final", batch_size=32)
    lm_eval.simple_evaluate(model=lm, tasks=[...])

Command line: lm-eval finds models only in its in-process registry (0.4.13 reads no plugin entry
points), so the plain `lm_eval` command cannot know our model. `fixedcode_study/lm_eval_model.py`
is the `lm_eval` CLI with `fixedcode` registered first; every lm_eval flag works unchanged:

    fixedcode lm-eval --model fixedcode \
        --model_args checkpoint=PATH --tasks hellaswag --batch_size 32

checkpoint= is a job directory or its checkpoints/final folder. lm-eval splits model_args at every
comma, and the sweep's folder names hold commas (`input=gf2,seed=1`): `split_checkpoint_arg` takes
the longest run of pieces after `checkpoint=` that names an existing path, both here (a model_args
string given to lm-eval's Python API) and in the command line (cli/lm_eval_model.py, which also
maps one of our exports to its source checkpoint, hub/source.py).

The scoring follows HFLM (lm_eval/models/huggingface.py) request for request, so numbers are
comparable with published lm-eval results:
  * loglikelihood: TemplateLM splits context/continuation the harness way (trailing context
    whitespace moves to the continuation, the pair is encoded together and split; an empty context
    is the end-of-text token). Requests are sorted longest first, right-padded and run one forward
    per batch; requests sharing context+continuation[:-1] (multiple choice with one-token answers)
    share one row, as in HFLM. Too-long inputs are cut from the left to the context length.
  * loglikelihood_rolling: disjoint windows of the model's context length, first window
    conditioned on end-of-text (lm_eval.utils.get_rolling_token_windows, context_len=1).
  * generate_until: greedy decoding; stops at any `until` string, end-of-text or max_gen_toks.
Unlike HFLM we apply the output head and log-softmax only at the continuation positions (the
context positions' logits are never used), which is where most of the speed difference comes from.
Right padding cannot change earlier positions of a causal model, so a request's score does not
depend on the batch it lands in beyond float rounding.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import Collator
from tqdm import tqdm

from ..data.tokenizer import end_of_text_id
from ..errors import ConfigError
from ..model import Decoder
from ..record.checkpoint import TOKENIZER_FILE, load_checkpoint
from ..record.jobdir import JobDir

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_GEN_TOKS = 256
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

Request = tuple[tuple[str, str] | None, list[int], list[int]]  # (strings or None, context ids, continuation ids)
CHECKPOINT_ARG = "checkpoint="
QUOTES = "'\""


def split_checkpoint_arg(arg_string: str) -> tuple[str | None, list[str]]:
    """(the checkpoint= path, the other comma-separated items) of a model_args string.

    The path runs from `checkpoint=` over as many following comma-separated pieces as still name
    an existing file or folder (the longest such run; just the first piece when none exists, for
    the loader to name). A quoted path (lm-eval's CLI keeps quoted commas) is taken as quoted."""
    pieces = arg_string.split(",")
    start = next((i for i, p in enumerate(pieces) if p.strip().startswith(CHECKPOINT_ARG)), None)
    if start is None:
        return None, [p for p in pieces if p]
    head = pieces[start].strip()[len(CHECKPOINT_ARG):]

    def upto(end: int) -> str:  # the path if it ran up to (not including) piece `end`
        return ",".join([head, *pieces[start + 1:end]]).strip()

    if head and head[0] in QUOTES:  # up to the first piece that closes the quote
        closed = [e for e in range(start + 1, len(pieces) + 1) if len(upto(e)) > 1 and upto(e).endswith(head[0])]
        end = closed[0] if closed else start + 1
        path = upto(end)[1:-1] if closed else head
    else:  # the longest run that exists
        existing = [e for e in range(len(pieces), start + 1, -1) if Path(upto(e)).expanduser().exists()]
        end = existing[0] if existing else start + 1
        path = upto(end)
    return path, [p for p in pieces[:start] + pieces[end:] if p]


def final_folder(checkpoint: str | os.PathLike) -> Path:
    """A job directory's checkpoints/final; any other path as given."""
    job_final = JobDir(Path(checkpoint).expanduser()).final_checkpoint
    return job_final if job_final.is_dir() else Path(checkpoint).expanduser()


def resolve_device(device: str | torch.device | None) -> torch.device:
    """None/'auto' -> cuda when present, else cpu. lm-eval's CLI passes 'cuda' by default, so an
    unavailable cuda falls back to cpu with a warning (as HFLM does) instead of failing."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        log.warning("device=%s requested but CUDA is not available; using cpu", device)
        return torch.device("cpu")
    return device


def parse_batch_size(batch_size: int | str | None, max_batch_size: int | None) -> int:
    """A fixed batch size. lm-eval's 'auto' (memory probing) is mapped to max_batch_size or the
    default: results must not depend on how much memory happened to be free."""
    if batch_size is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(batch_size, str) and batch_size.startswith("auto"):
        bs = int(max_batch_size or DEFAULT_BATCH_SIZE)
        log.warning("batch_size=%s: using a fixed batch size of %d (max_batch_size or the default)", batch_size, bs)
        return bs
    try:
        bs = int(batch_size)
    except ValueError:
        raise ConfigError("batch_size", f"{batch_size!r} is not an integer", "pass a positive integer") from None
    if bs < 1:
        raise ConfigError("batch_size", f"{bs} is not positive", "pass a positive integer")
    return min(bs, int(max_batch_size)) if max_batch_size else bs


class FixedCodeLM(TemplateLM):
    """lm-eval model over a fixedcode_study checkpoint (or an in-memory Decoder + tokenizer)."""

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        batch_size: int | str | None = DEFAULT_BATCH_SIZE,
        max_batch_size: int | None = None,
        device: str | torch.device | None = None,
        dtype: str = "float32",
        max_length: int | None = None,
        model: Decoder | None = None,
        tokenizer: Any = None,
        checkpoint_config: dict[str, Any] | None = None,
        saved_at: str | os.PathLike | None = None,
        **unused: Any,
    ):
        """`checkpoint=`: a checkpoint to load (what lm-eval's command line passes). Or a model in
        memory: `model` and `tokenizer`, with the config.json of the checkpoint it was saved as
        (`checkpoint_config`, `saved_at`) when there is one (training evaluates its model so)."""
        super().__init__()
        if unused:
            log.warning("fixedcode: ignoring unknown model_args %s", sorted(unused))
        if dtype not in DTYPES:
            raise ConfigError("dtype", f"{dtype!r} is not one of {sorted(DTYPES)}", "pass dtype=float32 or bfloat16")
        self._device = resolve_device(device)
        if checkpoint is not None:
            checkpoint = final_folder(checkpoint)
            loaded = load_checkpoint(checkpoint, device="cpu")
            model, tokenizer, self.checkpoint_config = loaded.model, loaded.tokenizer, loaded.config
            self.checkpoint = str(checkpoint.resolve())
        elif model is None or tokenizer is None:
            raise ConfigError("checkpoint", "no checkpoint given", "pass model_args checkpoint=PATH (a checkpoint directory)")
        else:
            self.checkpoint = str(Path(saved_at).resolve()) if saved_at is not None else None
            self.checkpoint_config = dict(checkpoint_config or {})
        self.model: Decoder = model.to(device=self._device, dtype=DTYPES[dtype]).eval()
        self.dtype = dtype
        self.tokenizer = tokenizer  # HF `tokenizers.Tokenizer`
        # The token every training document ended with: conditions empty contexts and rolling windows.
        declared = (self.checkpoint_config.get("data") or {}).get("eot_token")
        self._eot = end_of_text_id(tokenizer, declared, field="checkpoint")
        context = self.model.config.max_seq_len
        self._max_length = min(int(max_length), context) if max_length else context
        self.batch_size = parse_batch_size(batch_size, max_batch_size)
        self.max_batch_size = max_batch_size
        self._warned: set[str] = set()

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> "FixedCodeLM":
        """lm-eval's Python API with model_args as one string (`simple_evaluate(model="fixedcode",
        model_args=...)`): as TemplateLM's, but a checkpoint path may hold commas."""
        checkpoint, rest = split_checkpoint_arg(arg_string or "")
        args = lm_utils.simple_parse_args_string(",".join(rest))
        if checkpoint is not None:
            args["checkpoint"] = checkpoint
        return cls(**args, **{k: v for k, v in (additional_config or {}).items() if v is not None})

    # --- what TemplateLM and the evaluator ask of a model -----------------------------------
    @property
    def eot_token_id(self) -> int:
        return self._eot

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return str(Path(self.checkpoint) / TOKENIZER_FILE) if self.checkpoint else "in-memory"

    def get_model_info(self) -> dict[str, Any]:
        """Recorded by simple_evaluate under results['config']."""
        return {
            "checkpoint": self.checkpoint,
            "fixedcode_model": self.checkpoint_config.get("model", {}).get("name"),
            "fixedcode_input": self.checkpoint_config.get("input", {}).get("name"),
            "max_length": self.max_length,
            "dtype": self.dtype,
        }

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        # Our byte-level BPE adds no special tokens, so add_special_tokens changes nothing.
        return self.tokenizer.encode(string, add_special_tokens=False).ids

    def tok_decode(self, tokens: Iterable[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    # --- model calls ----------------------------------------------------------------------
    @torch.inference_mode()
    def _score_batch(self, inputs: list[list[int]], spans: list[int]) -> list[torch.Tensor]:
        """Log-probabilities over the vocabulary at the last `span` positions of each input.

        inputs: token lists (each <= max_length), right-padded here into one (B, T) batch.
        Returns one (span, V) fp32 tensor per input.
        """
        T = max(len(x) for x in inputs)
        batch = torch.full((len(inputs), T), self._eot, dtype=torch.long)
        for row, ids in enumerate(inputs):
            batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        hidden = self.model.features(batch.to(self._device))  # (B, T, d)
        picked = torch.cat([hidden[row, len(ids) - span : len(ids)]
                            for row, (ids, span) in enumerate(zip(inputs, spans))])  # (sum spans, d)
        logprobs = F.log_softmax(self.model.head(picked).float(), dim=-1)  # (sum spans, V)
        return list(logprobs.split(spans))

    def _loglikelihood_tokens(self, requests: list[Request], disable_tqdm: bool = False,
                              **kwargs: Any) -> list[tuple[float, bool]]:
        for _, ctx, cont in requests:
            if not ctx or not cont:
                raise ValueError("fixedcode: a loglikelihood request needs a non-empty context and continuation")
            if len(cont) > self.max_length:
                # HFLM asserts here; a small study model would stop a whole suite over one long choice.
                self._warn_once("long_cont", "fixedcode: continuations longer than the context (%d tokens) "
                                "are scored on their last %d tokens only", self.max_length, self.max_length)

        # Longest first (HFLM's order); requests sharing context+continuation[:-1] share one row.
        order = Collator(requests, sort_fn=lambda r: (-len(r[1] + r[2]), tuple(r[1] + r[2])),
                         group_by="contexts", group_fn=lambda r: r[1] + r[2][:-1])
        results: list[tuple[float, bool]] = []
        pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="fixedcode loglikelihood")
        for chunk in order.get_batched(n=self.batch_size):
            inputs, spans = [], []
            for _, ctx, cont in chunk:
                whole = ctx + cont
                if len(whole) > self.max_length + 1:
                    self._warn_once("truncate", "fixedcode: inputs longer than %d tokens are cut from the left",
                                    self.max_length)
                inputs.append(whole[-(self.max_length + 1):][:-1])  # the last token is only predicted
                spans.append(min(len(cont), self.max_length))
            for (req_str, ctx, cont), logprobs in zip(chunk, self._score_batch(inputs, spans)):
                logprobs = logprobs.unsqueeze(0)  # (1, span, V)
                # Members of a shared-row group may have shorter continuations: score the tail.
                for member_str, member_cont, member_lp in order.get_cache(
                    req_str=req_str, cxt_toks=ctx, cont_toks=cont, logits=logprobs
                ):
                    member_cont = member_cont[-self.max_length:]
                    target = torch.tensor(member_cont, dtype=torch.long, device=member_lp.device)
                    tail = member_lp[0, -len(member_cont):]  # (n, V)
                    answer = (float(tail.gather(1, target[:, None]).sum()),
                              bool((tail.argmax(dim=-1) == target).all()))
                    results.append(answer)
                    if member_str is not None:
                        self.cache_hook.add_partial("loglikelihood", member_str, answer)
                    pbar.update(1)
        pbar.close()
        return order.get_original(results)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows: list[Request] = []
        owner: list[int] = []
        for i, (text,) in enumerate(req.args for req in requests):
            for ctx, cont in map(lm_utils.make_disjoint_window, lm_utils.get_rolling_token_windows(
                token_list=self.tok_encode(text), prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length, context_len=1,
            )):
                windows.append((None, ctx, cont))
                owner.append(i)
        totals = [0.0] * len(requests)
        for i, (ll, _) in zip(owner, self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm)):
            totals[i] += ll
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return [float(t) for t in totals]

    @torch.inference_mode()
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy decoding, batched over requests whose prompts have the same token length (no
        padding needed, so a batch computes exactly what single requests would)."""
        prepared = []
        for i, req in enumerate(requests):
            context, gen_kwargs = req.args
            kwargs = dict(gen_kwargs or {})
            if kwargs.get("do_sample") and float(kwargs.get("temperature", 1.0) or 0.0) > 0:
                self._warn_once("sample", "fixedcode: sampling was requested; decoding greedily")
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else [u for u in until if u]
            max_gen = int(kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
            ids = self.tok_encode(context)[-self.max_length:] or [self._eot]
            prepared.append((i, ids, until, max_gen))

        outputs = [""] * len(requests)
        groups: dict[int, list] = {}
        for item in prepared:
            groups.setdefault(len(item[1]), []).append(item)
        pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="fixedcode generate_until")
        for _, group in sorted(groups.items(), reverse=True):
            for start in range(0, len(group), self.batch_size):
                chunk = group[start:start + self.batch_size]
                for (i, _, _, _), text in zip(chunk, self._greedy(chunk)):
                    outputs[i] = text
                    self.cache_hook.add_partial("generate_until", requests[i].args, text)
                pbar.update(len(chunk))
        pbar.close()
        return outputs

    def _greedy(self, chunk: list[tuple[int, list[int], list[str], int]]) -> list[str]:
        seqs = torch.tensor([ids for _, ids, _, _ in chunk], dtype=torch.long, device=self._device)  # (B, T)
        new: list[list[int]] = [[] for _ in chunk]
        texts: list[str | None] = [None] * len(chunk)
        for step in range(max(max_gen for *_, max_gen in chunk)):
            window = seqs[:, -self.max_length:]  # slide when the sequence outgrows the context
            hidden = self.model.features(window)[:, -1]  # (B, d)
            next_ids = self.model.head(hidden).argmax(dim=-1)  # (B,)
            seqs = torch.cat([seqs, next_ids[:, None]], dim=1)
            for row, (_, _, until, max_gen) in enumerate(chunk):
                if texts[row] is not None:
                    continue
                token = int(next_ids[row])
                if token != self._eot:
                    new[row].append(token)
                text = self.tok_decode(new[row])
                hits = [text.index(u) for u in until if u in text]
                if hits:
                    texts[row] = text[: min(hits)]
                elif token == self._eot or len(new[row]) >= max_gen:
                    texts[row] = text
            if all(t is not None for t in texts):
                break
        return [t if t is not None else self.tok_decode(n) for t, n in zip(texts, new)]


register_model("fixedcode")(FixedCodeLM)  # lm-eval's registry: `--model fixedcode` / model="fixedcode"
