"""Data: from a text source to the token batches a job trains and validates on.

- `corpus`: named sources (built-in Shakespeare, local files, Hugging Face datasets, mixtures)
  that yield documents, and the pieces large sources are cut into.
- `split`: which documents are held out (data.split: `shuffle` | `name_hash`), the same rule on
  both paths below, and the held-out split's unigram reference.
- `tokenizer`: byte-level BPE trained here, or a Hugging Face tokenizer; bytes per token.
- `prepare`: corpus -> held-out split by document -> tokenizer -> token memmaps, cached by content
  (`prepare(cfg.data)` returns a PreparedData).
- `shards`: the same for corpora too large for memory: sharded, parallel, restartable; the
  held-out split of a mixture is stratified by source (each in proportion to its weight).
- `layout`: the file names of a prepared folder and the one cache key scheme both paths use.
- `batches`: the data order (a pure function of seed, optimizer step and slot; world-size
  invariant and resumable) and the validation windows, each labelled with its source and
  global index, as a Lightning DataModule.
- `heldout`: a held-out vocabulary for the new-tokens protocol (issue 44): a seeded set of merged
  tokens drawn by frequency band, and the token stream with each of them spelled as its merge's parts.
"""
