"""Bring your own data: validate a file or folder, then copy it into the artifacts folder.

One-way dependency: this module imports ``core.data.datasets`` (loaders, listing), never the reverse.

The input is fully checked before anything is written, and the copy is moved into place in one
rename, so a malformed file is never half-imported. Memory stays bounded whatever the file's size: every file is
first counted a line at a time against ``QRS_IMPORT_MAX_ROWS`` (a larger one is refused in one line); a BEIR folder
is then checked a line at a time by the loader's own readers (``beir_documents``, ``beir_queries``, ``beir_qrels``),
holding its ids, not its texts; a pairs or candidate file, within the row limit, is parsed as the loader parses it.
The copy is made in blocks (``shutil.copyfileobj``).
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from core.data.datasets import _PATH_LOADERS, imported_datasets, imported_root, load_imported  # noqa: F401 (re-exported)
from core.data.loaders import beir_documents, beir_qrels, beir_queries
from core.errors import DataFormatError, StudioError
from core.settings import settings

KINDS = ("beir", "pairs", "candidates")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _root() -> Path:
    return imported_root()


def import_dataset(kind: str, source: str | Path, name: str) -> str:
    """Validate ``source`` as ``kind`` and store it as ``user/<name>``; returns the dataset name."""
    if kind not in KINDS:
        raise StudioError(f"unknown data kind {kind!r}; use one of {', '.join(KINDS)}")
    if not _NAME.match(name):
        raise StudioError(f"dataset name {name!r} must be 1-64 letters, digits, '_', '-' or '.'")
    source = Path(source)
    check_rows(source)
    if kind == "beir":
        check_beir_folder(source)
    else:
        _PATH_LOADERS[kind](source)  # raises DataFormatError (file, line, problem) before any write
    target = _root() / name
    if target.exists():
        raise StudioError(f"dataset user/{name} already exists; pick another name or delete {target}")
    with tempfile.TemporaryDirectory(dir=_root()) as tmp:
        staging = Path(tmp) / "data"
        if source.is_dir():
            shutil.copytree(source, staging / source.name)
        else:
            staging.mkdir()
            shutil.copy2(source, staging / source.name)
        (staging / "meta.json").write_text(
            json.dumps({"kind": kind, "source": str(source), "file": source.name}), encoding="utf-8"
        )
        staging.rename(target)
    return f"user/{name}"


def check_rows(source: Path) -> None:
    """Every file of ``source`` (a file, or a folder's files) holds at most ``QRS_IMPORT_MAX_ROWS`` lines, counted a
    line at a time; else one ``DataFormatError`` line naming the file, before any file is parsed."""
    limit = settings().import_max_rows
    files = sorted(f for f in source.rglob("*") if f.is_file()) if source.is_dir() else [source]
    for path in files:
        if not path.is_file():
            continue
        with path.open("rb") as handle:
            for count, _ in enumerate(handle, start=1):
                if count > limit:
                    raise DataFormatError(path, None, f"has more than {limit:,} rows; the import limit is {limit:,} "
                                          "rows per file (set QRS_IMPORT_MAX_ROWS to raise it)")


def check_beir_folder(root: Path, split: str = "test") -> dict[str, int]:
    """The loader's checks of a BEIR folder, a line at a time, holding ids only; returns its counts."""
    if not root.is_dir():
        raise DataFormatError(root, None, "a BEIR import is a folder with corpus.jsonl, queries.jsonl and qrels/")
    corpus: set[str] = set()
    for doc_id, _ in beir_documents(root, corpus):
        corpus.add(doc_id)
    queries: set[str] = set()
    for qid, _ in beir_queries(root, queries):
        queries.add(qid)
    judged: set[str] = set()
    rows = 0
    for qid, _, _ in beir_qrels(root, split, queries, corpus):
        judged.add(qid)
        rows += 1
    return {"documents": len(corpus), "queries": len(judged), "qrels": rows}
