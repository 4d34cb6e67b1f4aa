"""Which tokenizer turns text into token IDs, and what each ID is worth in bytes.

`data.tokenizer` picks one:
  bpe                          (default) byte-level BPE trained here on the training split, to
                               data.vocab_size tokens, id 0 = <|endoftext|>
  /path/to/dir                 a saved Hugging Face tokenizer (`save_pretrained` directory with
                               tokenizer.json, or a directory transformers can load)
  /path/to/tokenizer.json      a `tokenizers` file
  HuggingFaceTB/SmolLM2-1.7B   a Hub repository: tokenizer.json from the local HF cache, else the
                               Hub (the paper's tokenizer, V = 49,152). Offline, this fails with
                               one line that says how to bring the files over.
Every tokenizer is used as a `tokenizers.Tokenizer`, so preparation, pre-tokenization and the
checkpoint's tokenizer.json are the same whichever one was chosen.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import ConfigError

BPE = "bpe"
EOT = "<|endoftext|>"
# End-of-document tokens of common tokenizer families, tried when the tokenizer does not say.
_EOT_CANDIDATES = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "<|im_end|>", "[SEP]")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass
class LoadedTokenizer:
    tokenizer: "object"  # tokenizers.Tokenizer
    eot_id: int
    spec: str  # "bpe", a hub name or a local path, as configured

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def sha256(self) -> str:
        return tokenizer_sha256(self.tokenizer)


def tokenizer_sha256(tok) -> str:
    """Hash of the tokenizer's full serialization: same hash <=> same IDs for the same text."""
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()


def storage_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65_536 else np.uint32)


def encode_documents(tok, texts: list[str], eot: int, dtype: np.dtype) -> np.ndarray:
    """Token IDs of the texts, each followed by end-of-text, as one flat array (both preparation paths)."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # no offsets: the same IDs, faster
    encodings = encode(texts, add_special_tokens=False)
    count = sum(len(e.ids) + 1 for e in encodings)
    return np.fromiter(itertools.chain.from_iterable((*e.ids, eot) for e in encodings), dtype=dtype, count=count)


def train_bpe(texts: Iterable[str], vocab_size: int, length: int | None = None):
    """Byte-level BPE (GPT-2 style) with one special token, id 0 = end-of-text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257:
        raise ConfigError("data.vocab_size", f"{vocab_size} is below the 256 byte tokens + end-of-text", "use >= 257")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    return tok


def is_pretrained(spec: str | None) -> bool:
    return bool(spec) and str(spec) != BPE


def _declared_eos(directory: Path) -> str | None:
    """The eos token a saved transformers tokenizer declares, if any."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = directory / name
        if path.is_file():
            eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token")
            if isinstance(eos, dict):
                eos = eos.get("content")
            if eos:
                return str(eos)
    return None


def end_of_text_id(tok, declared: str | None, field: str = "data.eot_token") -> int:
    """ID appended after every document: the declared token, else a known end-of-text token."""
    for token in ((declared,) if declared else _EOT_CANDIDATES):
        tid = tok.token_to_id(token)
        if tid is not None:
            return int(tid)
    what = f"{declared!r} is not in the tokenizer" if declared else "the tokenizer has no known end-of-text token"
    raise ConfigError(field, what, "set data.eot_token to the tokenizer's end-of-document token")


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it: nothing may be fetched from the Hub."""
    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        from huggingface_hub import constants

        return flag or bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return flag


def _from_hub(name: str, revision: str | None) -> tuple[Path, Path | None]:
    """tokenizer.json (and tokenizer_config.json if present) from the HF cache or the Hub."""
    offline = hub_offline()
    fix = (f"on a machine with network run `huggingface-cli download {name} tokenizer.json tokenizer_config.json "
           f"--local-dir DIR`, copy DIR here and set data.tokenizer=DIR")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError("data.tokenizer", f"{name!r} is not a local path and huggingface_hub is not installed", fix) from None
    try:
        tok_file = Path(hf_hub_download(name, "tokenizer.json", revision=revision, local_files_only=offline))
    except Exception as err:  # noqa: BLE001 - every hub failure becomes the same one-line message
        why = ("the Hugging Face Hub is offline here (HF_HUB_OFFLINE=1) and no cached copy exists" if offline
               else f"it could not be fetched from the Hugging Face Hub ({type(err).__name__}; no network?)")
        raise ConfigError("data.tokenizer", f"{name!r} is not a local file or directory and {why}", fix) from None
    try:
        cfg_file = Path(hf_hub_download(name, "tokenizer_config.json", revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - optional: only used to find the eos token
        cfg_file = None
    return tok_file, cfg_file


def load_pretrained(spec: str, revision: str | None = None, eot_token: str | None = None) -> LoadedTokenizer:
    """A Hugging Face tokenizer by local file, local directory or Hub name, as a `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer

    path = Path(os.path.expanduser(str(spec)))
    declared = eot_token
    if path.is_file():
        tok = Tokenizer.from_file(str(path))
        declared = declared or _declared_eos(path.parent)
    elif path.is_dir():
        if (path / "tokenizer.json").is_file():
            tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        else:  # e.g. a SentencePiece-only directory: let transformers convert it to a fast tokenizer
            try:
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(str(path), use_fast=True).backend_tokenizer
            except Exception as err:  # noqa: BLE001
                raise ConfigError("data.tokenizer", f"{path} has no tokenizer.json and transformers cannot load it "
                                  f"({type(err).__name__})", "save it with save_pretrained() from a fast tokenizer") from None
        declared = declared or _declared_eos(path)
    elif not _HUB_NAME.match(str(spec)):
        raise ConfigError("data.tokenizer", f"{spec!r} is neither an existing path nor a Hub name",
                          "give a tokenizer directory, a tokenizer.json file, a Hub name or 'bpe'")
    else:
        tok_file, cfg_file = _from_hub(str(spec), revision)
        tok = Tokenizer.from_file(str(tok_file))
        declared = declared or (_declared_eos(cfg_file.parent) if cfg_file else None)
    return LoadedTokenizer(tok, end_of_text_id(tok, declared), str(spec))


# -- bytes per token, for bits-per-byte --------------------------------------------------------
_BYTE_FALLBACK = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


def _decoder_types(tok) -> set[str]:
    """Types of the tokenizer's decoder, looking inside Sequence decoders."""
    spec = json.loads(tok.to_str()).get("decoder") or {}
    found, stack = set(), [spec]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            found.add(d.get("type"))
            stack.extend(d.get("decoders") or [])
    return found


def token_byte_lengths(tok, vocab_size: int) -> np.ndarray:
    """UTF-8 bytes each token stands for (0 for special tokens and unused IDs), length vocab_size.

    Byte-level BPE (GPT-2, SmolLM2, our own): every character of a token's string is exactly one
    byte. SentencePiece-style: '▁' is one space byte and <0xNN> byte-fallback tokens are one byte.
    Otherwise the decoded single token is measured.
    """
    specials = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    kinds = _decoder_types(tok)
    out = np.zeros(max(vocab_size, 0), dtype=np.int32)
    for i in range(min(vocab_size, tok.get_vocab_size())):
        piece = tok.id_to_token(i)
        if piece is None or piece in specials:
            continue
        if "ByteLevel" in kinds:
            out[i] = len(piece)
        elif _BYTE_FALLBACK.match(piece):
            out[i] = 1
        elif "Metaspace" in kinds or "▁" in piece:
            out[i] = len(piece.replace("▁", " ").encode("utf-8"))
        elif "WordPiece" in kinds:
            out[i] = len(piece.removeprefix("##").encode("utf-8"))
        else:
            out[i] = len(tok.decode([i]).encode("utf-8"))
    return out
