"""The held-out vocabulary (data/heldout.py): H drawn by frequency band, each H token spelled with its
merge's parts, the rewritten stream free of H and decoding to the same text, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from fixedcode_study.data.heldout import draw_heldout, merge_parts, rewrite, spellings
from fixedcode_study.data.tokenizer import train_bpe
from fixedcode_study.errors import ConfigError

WORDS = ("the thee thou thine there where wherefore whether weather heather feather leather tether "
         "king kingdom kingly kinsman hamlet ophelia horatio polonius laertes claudius gertrude").split()


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    # Zipf-like word frequencies, so the frequency bands differ; punctuation and UTF-8 for the byte paths
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    texts = [" ".join(rng.choice(WORDS, size=60, p=weights / weights.sum())) + " — fin.\n" for _ in range(200)]
    tok = train_bpe(texts, vocab_size=420)
    ids = np.concatenate([np.asarray(tok.encode(t).ids, dtype=np.uint16) for t in texts])
    counts = np.bincount(ids, minlength=tok.get_vocab_size())
    return tok, texts, ids, counts


def test_each_merged_token_is_its_two_parts_joined(corpus):
    tok = corpus[0]
    parts = merge_parts(tok)
    assert len(parts) == tok.get_vocab_size() - 256 - 1   # every token but the bytes and end-of-text
    for merged, (left, right) in parts.items():
        assert tok.id_to_token(merged) == tok.id_to_token(left) + tok.id_to_token(right)


def test_the_draw_is_seeded_stratified_and_only_merged_tokens_that_occur(corpus):
    tok, _, _, counts = corpus
    parts = merge_parts(tok)
    held = draw_heldout(counts, parts, fraction=0.1, seed=3, strata=4)
    assert np.array_equal(held, draw_heldout(counts, parts, fraction=0.1, seed=3, strata=4))
    assert not np.array_equal(held, draw_heldout(counts, parts, fraction=0.1, seed=4, strata=4))
    assert all(int(t) in parts and counts[t] > 0 for t in held)
    eligible = np.array(sorted(t for t in parts if counts[t] > 0))
    order = eligible[np.lexsort((eligible, counts[eligible]))]
    bands = np.array_split(order, 4)
    assert [int(np.isin(band, held).sum()) for band in bands] == [max(1, round(0.1 * b.size)) for b in bands]
    # the rarest and the most frequent band both contribute: H is not all rare tokens
    assert counts[held].min() <= counts[bands[0]].max() and counts[held].max() >= counts[bands[-1]].min()


def test_the_rewritten_stream_has_no_held_out_token_and_the_same_text(corpus):
    tok, texts, ids, counts = corpus
    parts = merge_parts(tok)
    held = draw_heldout(counts, parts, fraction=0.2, seed=0)
    spelled = spellings(held, parts)
    for token, spelling in spelled.items():
        assert not set(spelling) & set(held.tolist())
        assert "".join(tok.id_to_token(t) for t in spelling) == tok.id_to_token(token)
    out = rewrite(ids, spelled, vocab_size=tok.get_vocab_size())
    assert out.dtype == ids.dtype and not np.isin(out, held).any()
    assert np.isin(ids, held).sum() > 50    # the draw did hit the stream
    assert out.size == ids.size + sum(len(spelled[int(t)]) - 1 for t in ids if int(t) in spelled)
    assert tok.decode(out.tolist()) == tok.decode(ids.tolist()) == "".join(texts)
    # tokens outside H keep their order: dropping H from the input and its spellings from the output
    # leaves the same sequence
    kept = ids[~np.isin(ids, held)]
    assert np.array_equal(kept, rewrite(kept, spelled, vocab_size=tok.get_vocab_size()))


def test_bad_requests_are_one_line_naming_the_setting(corpus):
    tok, _, _, counts = corpus
    parts = merge_parts(tok)
    with pytest.raises(ConfigError, match=r"^train\.heldout_fraction: 0 is not in \(0, 1\)"):
        draw_heldout(counts, parts, fraction=0, seed=0)
    byte = next(t for t in range(tok.get_vocab_size()) if t not in parts and counts[t] > 0)
    with pytest.raises(ConfigError, match=rf"^new_tokens: token {byte} has no merge"):
        spellings(np.array([byte]), parts)


# --- a prepared corpus without H: what train.heldout_fraction trains on -------------------------------

@pytest.fixture(scope="module")
def shakespeare(tmp_path_factory):
    """The built-in corpus at test_micro's vocabulary, prepared into this module's own cache."""
    from fixedcode_study.config import compose
    from fixedcode_study.data.prepare import prepare

    cfg = compose(["model=test_micro", f"data.cache_dir={tmp_path_factory.mktemp('cache')}"])
    return prepare(cfg.data, progress=False)


def test_no_pretraining_batch_holds_an_id_in_h_and_the_original_data_does(shakespeare):
    from fixedcode_study.data.batches import TokenDataModule
    from fixedcode_study.data.heldout import heldout_of, without_heldout

    held, spelled = heldout_of(shakespeare, 0.05, seed=0)
    pretraining = without_heldout(shakespeare, 0.05, seed=0)
    assert held.size == pretraining.meta["heldout"]["tokens"] and pretraining.meta["heldout"]["ids"] == held.tolist()
    seen = {}
    for name, prepared in (("pretraining", pretraining), ("original", shakespeare)):
        dm = TokenDataModule(prepared, 32, 16, seed=1)
        dm.setup("fit")
        loader = iter(dm.train_dataloader())  # what the Trainer draws: windows of seq_len + 1 tokens
        seen[name] = int(sum(np.isin(next(loader).numpy(), held).sum() for _ in range(200)))
        seen[name + " val"] = int(np.isin(np.asarray(prepared.tokens("val")), held).sum())
    assert seen["pretraining"] == 0 and seen["pretraining val"] == 0
    assert seen["original"] > 100 and seen["original val"] > 10, seen
    # the same text, byte for byte, so bits per byte compare; the counts in meta are the rewritten ones
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(pretraining.tokenizer_path))
    for split in ("train", "val"):
        assert tok.decode(np.asarray(pretraining.tokens(split)).tolist()) == \
            tok.decode(np.asarray(shakespeare.tokens(split)).tolist())
        assert pretraining.meta[f"{split}_tokens"] == np.asarray(pretraining.tokens(split)).size
    assert pretraining.meta["val_bytes"] == shakespeare.meta["val_bytes"]
    assert pretraining.meta["cache_key"] == f"{shakespeare.meta['cache_key']}+heldout-0.05-0"
    # written once: a second call reads the copy; another seed draws another set
    assert without_heldout(shakespeare, 0.05, seed=0).root == pretraining.root
    assert heldout_of(shakespeare, 0.05, seed=1)[0].tolist() != held.tolist()


def test_the_spec_settings_are_one_line_errors_and_an_old_spec_held_nothing_out():
    from fixedcode_study.config import compose
    from fixedcode_study.spec import JobSpec
    from fixedcode_study.spec.parts import TrainSpec

    for value, problem in (("0", "0 is not a share"), ("1.5", "1.5 is not a share"), ("lots", "'lots' is not a share")):
        with pytest.raises(ConfigError, match=rf"^train\.heldout_fraction: {problem} in \(0, 1\).*; set train\.heldout"):
            JobSpec.from_cfg(compose(["model=test_micro", f"train.heldout_fraction={value}"]))
    with pytest.raises(ConfigError, match=r"^train\.heldout_seed: -1 is not an integer"):
        JobSpec.from_cfg(compose(["model=test_micro", "train.heldout_fraction=0.05", "train.heldout_seed=-1"]))
    spec = JobSpec.from_cfg(compose(["model=test_micro", "train.heldout_fraction=0.05"]))
    assert spec.train.heldout_fraction == 0.05 and spec.train.heldout_seed == 0
    assert spec.fingerprint["settings"]["train.heldout_fraction"] == 0.05
    stored = spec.train.to_json()
    del stored["heldout_fraction"], stored["heldout_seed"]  # a spec stored before the setting existed
    assert TrainSpec.from_json(stored).heldout_fraction is None
