"""data.keep_between and the Gutenberg preset: each book without the licence text every file repeats."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixedcode_study.config import compose
from fixedcode_study.data.corpus import load_documents, plan_pieces, piece_documents, streams_from_config
from fixedcode_study.errors import ConfigError

GUTENBERG = Path(__file__).resolve().parents[3] / "shared" / "data" / "corpus" / "gutenberg"
BOOK = ("The Project Gutenberg EBook of X\nLicense: use it\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n"
        "Chapter 1.\nIt was a dark night.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nFull licence text.\n")
KEEP = [r"^\*\*\* ?START OF", r"^(\*\*\* ?END OF|End of (?i:the|this) Project Gutenberg)"]


def test_keep_between_keeps_the_text_between_the_markers(tmp_path):
    (tmp_path / "a.txt").write_text(BOOK)
    (tmp_path / "b.txt").write_text("no markers at all\n")
    docs = {Path(d.name).name: d.text for d in load_documents("text_files", [str(tmp_path / "*.txt")],
                                                               keep_between=KEEP)}
    assert docs == {"a.txt": "Chapter 1.\nIt was a dark night.\n", "b.txt": "no markers at all\n"}
    # the pre-tokenizing path (pieces) reads the same documents
    cfg = {"source": "text_files", "paths": [str(tmp_path / "*.txt")], "keep_between": KEEP}
    (stream,) = streams_from_config(cfg)
    pieced = {Path(d.name).name: d.text for p in plan_pieces(stream, 1 << 20) for d in piece_documents(p)}
    assert pieced == docs


@pytest.mark.parametrize("bad", [["(unclosed", "x"], ["only one"], "not a list"])
def test_a_bad_keep_between_is_one_line_naming_the_field(tmp_path, bad):
    (tmp_path / "a.txt").write_text(BOOK)
    with pytest.raises(ConfigError, match="data.keep_between"):
        load_documents("text_files", [str(tmp_path / "*.txt")], keep_between=bad)


@pytest.mark.skipif(not GUTENBERG.is_dir(), reason="../shared/data/corpus/gutenberg is not on this machine")
def test_the_gutenberg_preset_strips_every_books_licence(monkeypatch):
    monkeypatch.setenv("FIXEDCODE_GUTENBERG", str(GUTENBERG))
    data = compose(["data=gutenberg"]).data
    docs = load_documents(data.source, list(data.paths), data.doc_separator, data.text_field, data.keep_between)
    assert len(docs) == 107
    for doc in docs:
        assert "START OF TH" not in doc.text[:2000], doc.name
        assert "Project Gutenberg License" not in doc.text[-30000:] and "SMALL PRINT" not in doc.text[-30000:], doc.name
    assert sum(len(d.text) for d in docs) > 60e6  # the books themselves are kept
