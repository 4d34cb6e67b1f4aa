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


# -- two sources that can be told apart by their characters (stratified validation tests) -------
ALPHABETS = {"alpha": "abcdefghijklm", "omega": "nopqrstuvwxyz"}


def write_two_sources(root: Path, docs_per_source: int = 400, seed: int = 0) -> dict[str, Path]:
    """One JSONL file per source; documents of source s use only the letters ALPHABETS[s] and
    start with a unique tag (e.g. "ALPHA0042"), so any piece of text names its source and, when it
    holds a tag, its document. Returns {source: file}."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, letters in ALPHABETS.items():
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 6))) for _ in range(60)]
        path = root / f"{name}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(docs_per_source):
                text = f"{name.upper()}{i:04d} " + " ".join(rng.choice(words) for _ in range(rng.randint(20, 80))) + ".\n"
                fh.write(json.dumps({"text": text}) + "\n")
        files[name] = path
    return files


def two_source_mixture_cfg(files: dict[str, Path], tmp: Path, weights: dict[str, float], **over) -> dict:
    cfg = {"name": "two", "source": "mixture", "vocab_size": 300, "val_fraction": 0.2, "split_seed": 0,
           "shard_mb": 0.01, "tokenizer": "bpe", "cache_dir": str(tmp / "cache"), "workers": 0,
           "mixture": {name: {"kind": "files", "paths": [str(path)], "weight": weights[name]} for name, path in files.items()}}
    cfg.update(over)
    return cfg


# -- a few real optimizer steps through Lightning, for validation tests ---------------------------
def fit_briefly(prepared, max_steps: int, callbacks=(), *, val_check_interval: int | None = None, grad_accum: int = 1,
                seq_len: int = 32, batch_size: int = 4, val_batch_size: int = 16):
    """Train test_micro on `prepared` the way training/job.py does (same task, data module and
    Trainer settings that matter for validation), with a logger that keeps every logged row.
    Returns (task, datamodule, rows) with rows = [(step, {metric: value})]."""
    import lightning as L
    import torch
    from lightning.pytorch.loggers.logger import Logger

    from fixedcode_study.build import build_model
    from fixedcode_study.config import compose, plain
    from fixedcode_study.data.batches import TokenDataModule
    from fixedcode_study.spec import OptimSpec
    from fixedcode_study.training.task import LanguageModelTask

    class Rows(Logger):
        name, version = "rows", 0

        def __init__(self):
            super().__init__()
            self.rows = []

        def log_hyperparams(self, *args, **kwargs):
            pass

        def log_metrics(self, metrics, step=None):
            self.rows.append((step, dict(metrics)))

    cfg = compose(["model=test_micro", "input=learned"])
    L.seed_everything(0, verbose=False)
    model = build_model(cfg.model, cfg.input)
    dm = TokenDataModule(prepared, seq_len, batch_size, seed=0, val_batch_size=val_batch_size, grad_accum=grad_accum)
    task = LanguageModelTask(model, OptimSpec.of(plain(cfg.optim)), max_steps, seq_len * batch_size * grad_accum,
                             torch.from_numpy(prepared.token_bytes()), log_every=1)
    rows = Rows()
    trainer = L.Trainer(accelerator="cpu", devices=1, precision="32-true", max_steps=max_steps, max_epochs=-1,
                        logger=[rows], callbacks=list(callbacks), check_val_every_n_epoch=None,
                        val_check_interval=(val_check_interval or max_steps) * grad_accum,
                        accumulate_grad_batches=grad_accum, use_distributed_sampler=False, num_sanity_val_steps=0,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(task, datamodule=dm)
    return task, dm, rows.rows
