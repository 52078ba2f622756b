"""TREC run and qrels files: the one reader and writer of both formats (what trec_eval reads).

A run line is ``qid Q0 docid rank score tag``, a qrels line ``qid 0 docid label``. ``core.evaluation`` wraps
the run reader and writer for ranx ``Run`` objects; stored runs, exports, campaigns and the CLI call these.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from core.errors import DataFormatError


def _text_of(path: Path) -> str:
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_run(path: str | Path) -> tuple[dict[str, dict[str, float]], str | None]:
    """A TREC run file as ``{qid: {docid: score}}`` and its last line's tag, naming the line of any malformed
    row (:class:`DataFormatError`; also for a missing, non-UTF-8 or empty file)."""
    path = Path(path)
    data: dict[str, dict[str, float]] = {}
    tag = None
    for lineno, line in enumerate(_text_of(path).splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise DataFormatError(path, lineno, f"expected 6 columns 'qid Q0 docid rank score tag', got {len(cols)}")
        qid, _, did, rank, score, tag = cols
        try:
            int(rank)
            value = float(score)
        except ValueError:
            raise DataFormatError(path, lineno, f"rank must be an integer and score a number: {rank!r} {score!r}") from None
        data.setdefault(qid, {})[did] = value
    if not data:
        raise DataFormatError(path, None, "no run lines found")
    return data, tag


def ranked_text(ranked: Mapping[str, Iterable[tuple[str, float]]], tag: str, score_format: str | None = ".8g") -> str:
    """TREC run text of each query's (docid, score) pairs in the order given, ranks from 1, queries sorted;
    ``score_format`` None writes the score as Python prints it."""
    lines = []
    for q in sorted(ranked):
        for rank, (d, s) in enumerate(ranked[q], start=1):
            score = str(s) if score_format is None else format(s, score_format)
            lines.append(f"{q} Q0 {d} {rank} {score} {tag}\n")
    return "".join(lines)


def run_text(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    """TREC run text of ``{qid: {docid: score}}``, best first (score descending, then docid), six decimals."""
    return ranked_text({q: sorted(docs.items(), key=lambda kv: (-kv[1], kv[0])) for q, docs in run.items()}, tag, ".6f")


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file renamed over it), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def qrels_text(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels text (``qid 0 docid label``), sorted by query then docid."""
    return "".join(f"{q} 0 {d} {qrels[q][d]}\n" for q in sorted(qrels) for d in sorted(qrels[q]))


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read ``qid 0 docid label`` lines (what ``qrels_text`` writes), naming the line of a malformed one."""
    path = Path(path)
    out: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(_text_of(path).splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4 or not cols[3].lstrip("-").isdigit():
            raise DataFormatError(path, lineno, "expected 'qid 0 docid label'")
        out.setdefault(cols[0], {})[cols[2]] = int(cols[3])
    return out
