"""`vocabulary: data`: an input computed from the token strings (the spelling code) gets the job's own
tokenizer's strings, once, at the front door.

The strings are the tokenizer's vocabulary entries (`tokenizers`' id_to_token), one per token ID in
[0, model.vocab_size); an ID the tokenizer has no entry for gets "". They replace `data` in the
resolved input settings, so the stored spec (results.json `spec`, every checkpoint) holds exactly
the strings the code was computed from: a stored model rebuilds without the corpus or its cache,
whatever the data settings say later. A pretrained tokenizer (a Hub name or a path) is loaded as it
is; the default BPE, trained on the corpus, needs the job's data prepared (cached: the job would
prepare it a moment later anyway).
"""

from __future__ import annotations

from typing import Any, Mapping

from tokenizers import Tokenizer

from ..errors import ConfigError

FROM_DATA = "data"


def needs_vocabulary(input_cfg: Mapping[str, Any]) -> bool:
    """True when the input (or the code a code_map reads) asks for the job's token strings."""
    code = input_cfg.get("code")
    return input_cfg.get("vocabulary") == FROM_DATA or (isinstance(code, Mapping) and needs_vocabulary(code))


def token_strings(tokenizer: Tokenizer, vocab_size: int) -> list[str]:
    """One string per ID in [0, vocab_size): the tokenizer's entry, "" where it has none."""
    return [tokenizer.id_to_token(i) or "" for i in range(vocab_size)]


def resolve_vocabulary(input_cfg: Mapping[str, Any], data_settings: Mapping[str, Any], vocab_size: int) -> dict[str, Any]:
    """The input settings with every `vocabulary: data` replaced by the job's token strings."""
    cfg = dict(input_cfg)
    if not needs_vocabulary(cfg):
        return cfg
    tokenizer = job_tokenizer(data_settings)
    if tokenizer.get_vocab_size() > vocab_size:
        raise ConfigError("model.vocab_size", f"the tokenizer has {tokenizer.get_vocab_size()} tokens, more than "
                          f"the model's {vocab_size}", "raise model.vocab_size to the tokenizer's size")
    strings = token_strings(tokenizer, vocab_size)
    return _replace(cfg, strings)


def job_tokenizer(data_settings: Mapping[str, Any]) -> Tokenizer:
    """The tokenizer the job's data uses: a pretrained one (a Hub name or a path) is loaded as it is;
    the default BPE is trained on the corpus, so the corpus is prepared (cached) to get it."""
    from ..data.tokenizer import is_pretrained, load_pretrained

    spec = data_settings.get("tokenizer")
    if data_settings.get("source") != "pretokenized" and is_pretrained(spec):
        return load_pretrained(spec, data_settings.get("tokenizer_revision"), data_settings.get("eot_token")).tokenizer
    from ..data.prepare import prepare  # heavy: only inputs that spell need it

    return Tokenizer.from_file(str(prepare(data_settings, progress=False).tokenizer_path))


def _replace(cfg: dict[str, Any], strings: list[str]) -> dict[str, Any]:
    if cfg.get("vocabulary") == FROM_DATA:
        cfg["vocabulary"] = list(strings)
    if isinstance(cfg.get("code"), Mapping):
        cfg["code"] = _replace(dict(cfg["code"]), strings)
    return cfg
