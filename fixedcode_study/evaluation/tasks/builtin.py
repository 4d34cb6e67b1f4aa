"""Built-in downstream tasks on the held-out documents of the prepared corpus (no download needed).

Both are lm-eval tasks over files derived from `PreparedData.root / "val_docs.jsonl"` (documents
the model never trained on), and both reuse an official task definition the same way the mirrors
do, so the numbers are computed exactly like the official ones:

  fixedcode_heldout_ppl       = official `wikitext` (loglikelihood_rolling over whole documents;
                                word_perplexity, byte_perplexity, bits_per_byte) on
                                <root>/eval/heldout_docs-v1.jsonl, field `page` = the raw document.
                                The target is the raw text (wikitext's detokenizer is for WikiText's
                                tokenized markup only); words = len(re.split(r"\\s+", page)), bytes = UTF-8.
  fixedcode_heldout_lastword  = official `lambada_openai` (context = passage minus its last word,
                                target = " " + last word; acc and perplexity) on
                                <root>/eval/lastword-v1-w<W>-n<N>.jsonl, field `text`.

Last-word passages: walking through each document's whitespace-separated words, a passage is the
longest stretch of at most W words that ends in an ordinary word (capitalised or lower case, not an
all-caps speaker tag) closing a sentence or clause (followed by . ! ? ; or :), with at least W/2
words of context; the target's punctuation is dropped, as in LAMBADA. Passages do not overlap; at
most N, in document order. Spaces are normalised to single spaces so that
lambada's `text.split(' ')` sees words.

Derived files are written atomically (temporary file + rename) and reused when present; their names
carry a version and the settings, so a change in the derivation never reuses a stale file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ...data.layout import VAL_DOCS
from ...errors import ConfigError
from .mirror import official_yaml
from .yamlio import write_jsonl, write_task_yaml

HELDOUT_PPL = "fixedcode_heldout_ppl"
HELDOUT_LASTWORD = "fixedcode_heldout_lastword"
BUILTIN_TASKS = (HELDOUT_PPL, HELDOUT_LASTWORD)
DERIVATION_VERSION = 1
DEFAULTS = {"lastword_words": 40, "lastword_max_passages": 1000}

_ORDINARY_WORD = re.compile(r"[A-Za-z][a-z]+")  # "lord", "Athens"; not "PUCK" or "I"
_TRAILING_PUNCT = ".,;:!?'\")]-"
_CLAUSE_END = set(".!?;:")  # the target closes a sentence or clause, as LAMBADA's targets do


def read_val_docs(prepared_root: Path) -> list[dict[str, str]]:
    path = prepared_root / VAL_DOCS
    if not path.exists():
        raise ConfigError("eval.prepared_root", f"{path} does not exist",
                          "point it at a data cache written by fixedcode_study.data.prepare")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def lastword_passages(texts: list[str], words_per_window: int, max_passages: int) -> Iterator[str]:
    count = 0
    for text in texts:
        words = text.split()
        start = 0
        while start < len(words) and count < max_passages:
            window = words[start:start + words_per_window]
            for end in range(len(window) - 1, words_per_window // 2 - 1, -1):
                target = window[end].rstrip(_TRAILING_PUNCT)
                if window[end][-1:] in _CLAUSE_END and _ORDINARY_WORD.fullmatch(target):
                    yield " ".join(window[:end] + [target])
                    count += 1
                    start += end + 1  # the next passage starts after this one's target
                    break
            else:
                start += words_per_window  # no usable clause end in this window


def derive_files(prepared_root: Path, settings: Mapping[str, Any]) -> dict[str, Path]:
    """Write (once) the JSON Lines files the built-in tasks read; returns task -> file."""
    words, limit = int(settings["lastword_words"]), int(settings["lastword_max_passages"])
    if words < 4 or limit < 1:
        raise ConfigError("eval.builtin", f"lastword_words={words}, lastword_max_passages={limit}",
                          "use lastword_words >= 4 and lastword_max_passages >= 1")
    out = prepared_root / "eval"
    ppl_file = out / f"heldout_docs-v{DERIVATION_VERSION}.jsonl"
    lastword_file = out / f"lastword-v{DERIVATION_VERSION}-w{words}-n{limit}.jsonl"
    docs = None
    if not ppl_file.exists():
        docs = read_val_docs(prepared_root)
        write_jsonl(ppl_file, ({"name": d["name"], "page": d["text"]} for d in docs))
    if not lastword_file.exists():
        docs = docs or read_val_docs(prepared_root)
        passages = list(lastword_passages([d["text"] for d in docs], words, limit))
        if not passages:
            raise ConfigError("eval.builtin.lastword_words", f"{words} words per passage yields no passage",
                              "use a smaller lastword_words")
        write_jsonl(lastword_file, ({"text": p} for p in passages))
    return {HELDOUT_PPL: ppl_file, HELDOUT_LASTWORD: lastword_file}


def write_builtin_task(task: str, prepared_root: Path, settings: Mapping[str, Any], out_dir: Path) -> list[Path]:
    files = derive_files(prepared_root, {**DEFAULTS, **(settings or {})})
    source = {"prepared_root": str(prepared_root), "file": str(files[task])}
    if task == HELDOUT_PPL:
        config = {
            "include": str(official_yaml("wikitext/wikitext.yaml")),
            "task": HELDOUT_PPL,
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": {"test": str(files[task])}},
            "training_split": None,
            "validation_split": None,
            "test_split": "test",
            "doc_to_target": "{{page}}",  # raw document, no WikiText detokenizer
            "metadata": {"version": float(DERIVATION_VERSION), **source},
        }
    elif task == HELDOUT_LASTWORD:
        config = {
            "include": str(official_yaml("lambada/lambada_openai.yaml")),
            "task": HELDOUT_LASTWORD,
            "tag": [],
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": {"test": str(files[task])}},
            "test_split": "test",
            "metadata": {"version": float(DERIVATION_VERSION), **source},
        }
    else:
        raise ConfigError("eval.tasks", f"{task} is not a built-in task", f"use one of {BUILTIN_TASKS}")
    return [write_task_yaml(out_dir / f"{task}.yaml", config)]
