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
                                <root>/eval/lastword-v2-w<W>-n<N>.jsonl, field `text`.
  fixedcode_heldout_lastword_choice = the same passages as a 4-way choice (acc, acc_norm; chance
                                0.25): the target against 3 other ordinary words of the same
                                document, scored by loglikelihood like PIQA or ARC. Exact greedy
                                recall of the last word sits at the floor at CPU scale (1 of 714
                                passages for a learned cpu_tiny, issue 27); which word fits the
                                passage best is what a small model does learn.
                                <root>/eval/lastword_choice-v2-w<W>-n<N>.jsonl.

Last-word passages: walking through each document's whitespace-separated words, a passage is the
longest stretch of at most W words that ends in an ordinary word (capitalised or lower case, not an
all-caps speaker tag) closing a sentence or clause (followed by . ! ? ; or :), with at least W/2
words of context, preceded by a space (so lambada's `text.split(' ')` takes it as the last word);
the target's punctuation is dropped, as in LAMBADA. The passage keeps the document's own line breaks
and spacing, as the model saw text in training (v1 joined the words with single spaces). Passages do
not overlap; at most N, in document order. The choice task's distractors are drawn from the
document's ordinary words other than the target (case-insensitively), with a generator seeded by
the passage's index, and the gold position is drawn the same way.

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
HELDOUT_CHOICE = "fixedcode_heldout_lastword_choice"
BUILTIN_TASKS = (HELDOUT_PPL, HELDOUT_LASTWORD, HELDOUT_CHOICE)
DERIVATION_VERSION = 2
CHOICES = 4
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
    """Passages (the document's own text, up to and including the target word without its
    punctuation), as described in the module docstring."""
    return (passage for _, passage in _passages(texts, words_per_window, max_passages))


def _passages(texts: list[str], words_per_window: int, max_passages: int) -> Iterator[tuple[int, str]]:
    """(document index, passage) in document order."""
    count = 0
    for doc, text in enumerate(texts):
        spans = [m.span() for m in re.finditer(r"\S+", text)]  # words as (start, end) in the text
        start = 0
        while start < len(spans) and count < max_passages:
            window = spans[start:start + words_per_window]
            for end in range(len(window) - 1, words_per_window // 2 - 1, -1):
                w0, w1 = window[end]
                word = text[w0:w1]
                target = word.rstrip(_TRAILING_PUNCT)
                if (word[-1:] in _CLAUSE_END and _ORDINARY_WORD.fullmatch(target)
                        and text[w0 - 1:w0] == " " and text[w0 - 2:w0 - 1] not in (" ", "\n", "\t")):
                    yield doc, text[window[0][0]:w0] + target
                    count += 1
                    start += end + 1  # the next passage starts after this one's target
                    break
            else:
                start += words_per_window  # no usable clause end in this window
    return


def choice_items(texts: list[str], words_per_window: int, max_passages: int) -> Iterator[dict[str, Any]]:
    """The last-word passages as 4-way choices: {context, choices, gold}."""
    import random

    pools: dict[int, list[str]] = {}
    for i, (doc, passage) in enumerate(_passages(texts, words_per_window, max_passages)):
        if doc not in pools:  # the document's distinct ordinary words, in order of first use
            seen: dict[str, str] = {}
            for word in texts[doc].split():
                w = word.strip(_TRAILING_PUNCT + "(\"'[")
                if _ORDINARY_WORD.fullmatch(w):
                    seen.setdefault(w.lower(), w)
            pools[doc] = list(seen.values())
        context, target = passage.rsplit(" ", 1)
        others = [w for w in pools[doc] if w.lower() != target.lower()]
        if len(others) < CHOICES - 1:
            continue  # a document too short for three distractors
        rng = random.Random(i)
        choices = rng.sample(others, CHOICES - 1)
        gold = rng.randrange(CHOICES)
        choices.insert(gold, target)
        yield {"context": context, "choices": choices, "gold": gold}


def derive_files(prepared_root: Path, settings: Mapping[str, Any]) -> dict[str, Path]:
    """Write (once) the JSON Lines files the built-in tasks read; returns task -> file."""
    words, limit = int(settings["lastword_words"]), int(settings["lastword_max_passages"])
    if words < 4 or limit < 1:
        raise ConfigError("eval.builtin", f"lastword_words={words}, lastword_max_passages={limit}",
                          "use lastword_words >= 4 and lastword_max_passages >= 1")
    out = prepared_root / "eval"
    ppl_file = out / f"heldout_docs-v{DERIVATION_VERSION}.jsonl"
    lastword_file = out / f"lastword-v{DERIVATION_VERSION}-w{words}-n{limit}.jsonl"
    choice_file = out / f"lastword_choice-v{DERIVATION_VERSION}-w{words}-n{limit}.jsonl"
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
    if not choice_file.exists():
        docs = docs or read_val_docs(prepared_root)
        write_jsonl(choice_file, choice_items([d["text"] for d in docs], words, limit))
    return {HELDOUT_PPL: ppl_file, HELDOUT_LASTWORD: lastword_file, HELDOUT_CHOICE: choice_file}


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
    elif task == HELDOUT_CHOICE:
        config = {  # scored as lm-eval's own multiple-choice tasks (PIQA, ARC) are: acc and acc_norm
            "task": HELDOUT_CHOICE,
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": {"test": str(files[task])}},
            "test_split": "test",
            "output_type": "multiple_choice",
            "doc_to_text": "{{context}}",
            "doc_to_choice": "choices",
            "doc_to_target": "gold",
            "target_delimiter": " ",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": float(DERIVATION_VERSION), **source},
        }
    else:
        raise ConfigError("eval.tasks", f"{task} is not a built-in task", f"use one of {BUILTIN_TASKS}")
    return [write_task_yaml(out_dir / f"{task}.yaml", config)]
