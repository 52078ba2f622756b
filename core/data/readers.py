"""Checked reading of dataset files: UTF-8 lines (BOM dropped), texts within ``QRS_MAX_TEXT_CHARS``, labels,
pairs TSV rows, JSONL lines, ids (BEIR, candidate lists, pairs). Malformed input raises ``DataFormatError``
naming the file and line."""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from core.errors import DataFormatError
import core.settings as settings_module

MAX_TEXT_ENV = "QRS_MAX_TEXT_CHARS"
DEFAULT_MAX_TEXT_CHARS = settings_module.DEFAULT_MAX_TEXT_CHARS
"""Longest text (question, document, title + text) a dataset file may hold; QQP's longest is 756."""


def max_text_chars() -> int:
    """``QRS_MAX_TEXT_CHARS`` or ``DEFAULT_MAX_TEXT_CHARS``."""
    try:
        return settings_module.settings().max_text_chars
    except settings_module.SettingsError as exc:
        raise DataFormatError(MAX_TEXT_ENV, None, str(exc).removeprefix(f"{MAX_TEXT_ENV}: ")) from None


def check_text(text: str, path: Path, lineno: int, what: str, limit: int | None = None) -> str:
    """A text within ``limit`` (default ``max_text_chars()``; a file's reader reads it once, not once per text:
    the settings are read from the environment) or ``DataFormatError`` (file, line, what)."""
    if "\x00" in text:
        raise DataFormatError(path, lineno, f"the {what} contains a NUL character")
    limit = max_text_chars() if limit is None else limit
    if len(text) > limit:
        raise DataFormatError(path, lineno, f"the {what} has {len(text):,} characters; the limit is {limit:,} "
                              f"(set {MAX_TEXT_ENV} to raise it)")
    return text


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (a leading BOM is dropped), read line by line (``iter_lines``)."""
    return list(iter_lines(path))


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file one at a time (a leading BOM is dropped): memory holds one line, whatever the
    file's size.

    Refused with file and line: bytes that are not UTF-8, a NUL byte, and a line longer than the text
    limit allows (read no further than that: a 50 MB one-line file is not loaded into memory).
    """
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    limit = 16 * max_text_chars() + 4096  # bytes: two texts of 4-byte characters, JSON escapes, ids
    count = 0
    try:
        handle = gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot be read ({exc.strerror})") from None
    with handle:
        first = True
        while True:
            raw = handle.readline(limit + 1)
            if not raw:
                break
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise DataFormatError(path, count + 1, f"the line is longer than {limit:,} bytes; texts are limited "
                                      f"to {max_text_chars():,} characters (set {MAX_TEXT_ENV} to raise it)")
            if first:
                raw, first = raw.removeprefix(b"\xef\xbb\xbf"), False
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(path, count + 1, f"not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                                      "line); save the file as UTF-8") from None
            for piece in text.splitlines():  # same line breaks as str.splitlines on the whole file
                if "\x00" in piece:
                    raise DataFormatError(path, count + 1, "contains a NUL byte")
                count += 1
                yield piece


def read_label(value: str, path: Path, lineno: int, max_label: int | None = None) -> int:
    try:
        label = int(value.strip())
    except ValueError:
        raise DataFormatError(path, lineno, f"label must be an integer, got {value[:40]!r}") from None
    if label < 0:
        raise DataFormatError(path, lineno, f"label must be >= 0, got {label}")
    if max_label is not None and label > max_label:
        raise DataFormatError(path, lineno, f"label must be 0 to {max_label}, got {label}")
    return label


def read_pairs_tsv(path: str | Path, require_pair_id: bool = False) -> list[tuple[int, str, str, str]]:
    """Read ``label \\t text1 \\t text2 [\\t pair_id]`` lines (blank lines skipped)."""
    path = Path(path)
    rows = []
    limit = max_text_chars()
    for lineno, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) not in (3, 4) or (require_pair_id and len(cols) < 4):
            expected = "label<TAB>text1<TAB>text2<TAB>pair_id" if require_pair_id else "label<TAB>text1<TAB>text2[<TAB>pair_id]"
            raise DataFormatError(path, lineno, f"expected {expected}, got {len(cols)} column(s)")
        label = read_label(cols[0], path, lineno, max_label=1)  # a pair is a duplicate (1) or not (0)
        t1, t2 = cols[1].strip(), cols[2].strip()
        if not t1 or not t2:
            raise DataFormatError(path, lineno, "empty question text")
        check_text(t1, path, lineno, "first question", limit)
        check_text(t2, path, lineno, "second question", limit)
        pair_id = check_id(cols[3].strip(), path, lineno, "pair id") if len(cols) > 3 else str(lineno)
        rows.append((label, t1, t2, pair_id))
    if not rows:
        raise DataFormatError(path, None, "no pairs found")
    return rows


def parse_jsonl_line(path: Path, lineno: int, line: str) -> dict | None:
    """One line of a BEIR JSON-lines file as its object (``None`` for a blank line); ``DataFormatError`` naming
    the file and line when it is not a JSON object with an ``_id``."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, lineno, f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict) or "_id" not in obj:
        raise DataFormatError(path, lineno, 'each line must be a JSON object with an "_id"')
    return obj


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSON-lines file."""
    return list(iter_jsonl(path))


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSON-lines file, one line in memory at a time."""
    for lineno, line in enumerate(iter_lines(path), start=1):
        obj = parse_jsonl_line(path, lineno, line)
        if obj is not None:
            yield lineno, obj


def check_id(value: str, path: Path, lineno: int | None, what: str = "id") -> str:
    """An imported id that is printable with no whitespace (no space, tab, newline or other control character:
    an id is written into TREC files and shown on pages as is), or ``DataFormatError`` (file, line, what)."""
    if not value or not value.isprintable() or any(c.isspace() for c in value):
        raise DataFormatError(path, lineno, f"the {what} {value!r} must be printable with no whitespace "
                              "or control characters"[:200])
    return value


def beir_id(obj: dict, path: Path, lineno: int, seen: dict) -> str:
    """The ``_id`` of a BEIR line as a string (``check_id``); a repeated id is refused (the last copy would win)."""
    raw = obj["_id"]
    if not isinstance(raw, (str, int)) or isinstance(raw, bool) or not str(raw).strip():
        raise DataFormatError(path, lineno, f'"_id" must be a non-empty string, got {raw!r}'[:200])
    key = check_id(str(raw), path, lineno)
    if key in seen:
        raise DataFormatError(path, lineno, f"duplicate id {key!r} (already on an earlier line)")
    return key
