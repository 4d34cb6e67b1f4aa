"""Small local corpora in every supported file format, built in a tmp dir (no downloads)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from at which but "
         "have an they you were her she there café naïve 1984 2025 über").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + ".\n"


def write_corpus(root: Path, seed: int = 0) -> dict[str, list[str]]:
    """Text, JSONL, gzipped JSONL and Parquet files; returns {file: [document texts in order]}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    docs: dict[str, list[str]] = {}
    for i in range(3):  # one document per text file
        path = root / f"book{i}.txt"
        docs[str(path)] = ["".join(sentence(rng, rng.randint(5, 30)) for _ in range(40))]
        path.write_text(docs[str(path)][0], encoding="utf-8")
    for i in range(2):
        path = root / f"web{i}.jsonl"
        docs[str(path)] = [sentence(rng, rng.randint(3, 60)) for _ in range(150)]
        path.write_text("".join(json.dumps({"text": t, "id": j}) + "\n" for j, t in enumerate(docs[str(path)])), encoding="utf-8")
    path = root / "more.jsonl.gz"
    docs[str(path)] = [sentence(rng, rng.randint(3, 40)) for _ in range(60)]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"text": t}) + "\n" for t in docs[str(path)])
    path = root / "synthetic.parquet"
    docs[str(path)] = [sentence(rng, rng.randint(10, 50)) for _ in range(200)]
    pq.write_table(pa.table({"text": docs[str(path)], "n": list(range(200))}), path, row_group_size=40)
    return docs


def text_files_cfg(root: Path, tmp: Path, **over) -> dict:
    cfg = {"name": "corpus", "source": "text_files", "paths": [str(root / "*")], "doc_separator": None,
           "vocab_size": 400, "val_fraction": 0.1, "split_seed": 0, "shard_mb": 0.006,
           "tokenizer": "bpe", "cache_dir": str(tmp / "cache")}
    cfg.update(over)
    return cfg


def save_hf_tokenizer(texts: list[str], directory: Path, vocab_size: int = 300) -> Path:
    """A transformers tokenizer directory built locally: BPE with <s>, </s> specials, eos = </s> (id 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Digits + ByteLevel, like SmolLM2's tokenizer, so byte counting must look past a Sequence.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(str(directory))
    return directory
