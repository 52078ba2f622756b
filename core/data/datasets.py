"""Dataset model and loaders: collection (id -> text), queries, qrels, labelled pairs.

Loaders
- ``qqp-bimpm``: Quora Question Pairs, BiMPM partition (dev + test; train is not bundled).
  * Retrieval protocol of Guo et al. (tree-search-bert-guo.md §4.1): collection = every unique
    question of dev + test (36,737), queries = the questions of the 10,000 positive pairs, relevant =
    every other question of the query's paraphrase cluster (transitive closure of positive pairs,
    sdml-bonadiman2019.md §4.1.2). Every query is also in the collection, so it is dropped from its
    own ranking before scoring (BEIR ``ignore_identical_ids``): ``Dataset.ignore_identical_ids``.
  * A deterministic cluster-disjoint train / dev / test split for the learned models. The unit of
    the split is a connected component of *all* pairs (positive and negative), so every paraphrase
    cluster stays whole and every negative pair has both questions on the same side (none are
    dropped; the largest component has 60 questions). Components go 80/10/10 by a stable hash of
    their smallest question id.
- ``trecqa``: TrecQA answer selection (TRAIN, DEV, raw/clean TEST), one candidate list per question.
- Bring your own data: a BEIR folder, a pairs TSV (``label \\t text1 \\t text2``) or a candidate-list
  TSV (``qid \\t query \\t docid \\t doc \\t label``). Malformed input raises ``DataFormatError``
  naming the file and line; nothing is half-loaded.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import DataFormatError, UnknownNameError
from core.paths import data_dir
import core.settings as settings_module
from core.data.text import display_form

SPLITS = ("train", "dev", "test")
QUERY_FORMS = ("tokenized", "typed")  # a dataset query as stored, or as people type it (its display form)
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)


@dataclass(frozen=True)
class Pair:
    """A labelled question pair; ids point into the collection."""

    id1: str
    id2: str
    label: int
    pair_id: str = ""


@dataclass
class Dataset:
    """A retrieval/reranking dataset.

    ``corpus`` holds the original (model) text; ``display(doc_id)`` the form shown to people.
    ``query_splits`` names subsets of ``queries`` ("all", "train", "dev", "test", ...).
    ``candidates`` is set for reranking datasets (TrecQA, candidate-list TSV): qid -> doc ids.
    """

    name: str
    description: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    pairs: dict[str, list[Pair]] = field(default_factory=dict)
    query_splits: dict[str, list[str]] = field(default_factory=dict)
    candidates: dict[str, list[str]] = field(default_factory=dict)
    ignore_identical_ids: bool = False
    tokenized: bool = False

    def display(self, doc_id: str) -> str:
        """Human-readable text of a collection item (CoreNLP tokenization undone)."""
        text = self.corpus[doc_id]
        return display_form(text) if self.tokenized else text

    def display_query(self, qid: str) -> str:
        text = self.queries[qid]
        return display_form(text) if self.tokenized else text

    def in_form(self, queries: Mapping[str, str], form: str = "tokenized") -> dict[str, str]:
        """Queries ``{qid: text}`` as stored (``tokenized``) or as people type them (``typed``: the display form)."""
        if form not in QUERY_FORMS:
            raise UnknownNameError("query form", form, list(QUERY_FORMS))
        if form == "tokenized" or not self.tokenized:
            return dict(queries)
        return {q: display_form(t) for q, t in queries.items()}

    def split_queries(self, split: str = "all") -> dict[str, str]:
        """Queries of one split (``all`` = every query with qrels)."""
        if split == "all":
            return dict(self.queries)
        if split not in self.query_splits:
            raise UnknownNameError("query split", split, ["all", *self.query_splits])
        return {qid: self.queries[qid] for qid in self.query_splits[split]}

    def split_qrels(self, split: str = "all") -> dict[str, dict[str, int]]:
        return {qid: self.qrels[qid] for qid in self.split_queries(split) if self.qrels.get(qid)}

    def stats(self) -> dict[str, int]:
        out = {
            "collection": len(self.corpus),
            "queries": len(self.queries),
            "judged pairs (qrels)": sum(len(v) for v in self.qrels.values()),
        }
        for split, qids in self.query_splits.items():
            out[f"queries[{split}]"] = len(qids)
        for split, pairs in self.pairs.items():
            pos = sum(p.label > 0 for p in pairs)
            out[f"pairs[{split}]"] = len(pairs)
            out[f"positive pairs[{split}]"] = pos
        return out


# ----------------------------------------------------------------------------- clusters
class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def paraphrase_clusters(pairs: list[Pair]) -> dict[str, str]:
    """Question id -> cluster id (the cluster's smallest id): transitive closure of positive pairs.

    Questions that only occur in negative pairs are singleton clusters.
    """
    uf = _UnionFind()
    for p in pairs:
        uf.find(p.id1), uf.find(p.id2)
        if p.label > 0:
            uf.union(p.id1, p.id2)
    return {q: uf.find(q) for q in uf.parent}


def cluster_split(cluster_id: str, fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> str:
    """Deterministic split of a cluster: a stable hash of its id, cut at the given fractions."""
    bucket = int(hashlib.sha1(cluster_id.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    if bucket < fractions[0]:
        return "train"
    if bucket < fractions[0] + fractions[1]:
        return "dev"
    return "test"


def split_by_query(qids: list[str], positive: set[str]) -> dict[str, list[str]]:
    """Deterministic train / dev / test split by query (``cluster_split`` of the query id, 80/10/10), for
    imported BEIR and candidate-list data. With ≥ 3 queries that have a relevant item, an empty dev or
    test split gets the highest-hashed such training query, so every split can be evaluated."""
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for q in qids:
        out[cluster_split(q)].append(q)
    if len(positive) >= 3:
        for split in ("dev", "test"):
            donors = [q for q in out["train"] if q in positive]
            if donors and not any(q in positive for q in out[split]):
                donor = max(donors, key=lambda q: hashlib.sha1(q.encode("utf-8")).hexdigest()[:8])
                out["train"].remove(donor)
                out[split].append(donor)
    return out


def split_by_component(pairs: list[Pair]) -> dict[str, str]:
    """Question id -> split, one split per connected component of all pairs (see module docstring)."""
    uf = _UnionFind()
    for p in pairs:
        uf.union(p.id1, p.id2)
    return {q: cluster_split(uf.find(q)) for q in uf.parent}


def dataset_from_pairs(
    name: str,
    description: str,
    rows: list[tuple[int, str, str, str]],
    tokenized: bool = False,
) -> Dataset:
    """Build the retrieval protocol and the cluster-disjoint split from labelled pairs.

    ``rows`` are ``(label, text1, text2, pair_id)``; question ids are assigned in order of first
    appearance (``q00000``...), so they are stable for a given file.
    """
    ids: dict[str, str] = {}
    width = max(5, len(str(2 * len(rows))))

    def qid(text: str) -> str:
        if text not in ids:
            ids[text] = f"q{len(ids):0{width}d}"
        return ids[text]

    pairs = [Pair(qid(t1), qid(t2), label, pid) for label, t1, t2, pid in rows]
    corpus = {i: t for t, i in ids.items()}
    cluster_of = paraphrase_clusters(pairs)
    members: dict[str, list[str]] = defaultdict(list)
    for q, c in cluster_of.items():
        members[c].append(q)

    positive_questions = sorted({q for p in pairs if p.label > 0 for q in (p.id1, p.id2)})
    qrels = {
        q: {d: 1 for d in members[cluster_of[q]] if d != q} for q in positive_questions
    }
    split_of = split_by_component(pairs)
    pair_splits: dict[str, list[Pair]] = {s: [] for s in SPLITS}
    for p in pairs:
        pair_splits[split_of[p.id1]].append(p)  # both ends share a component, hence a split
    query_splits = {s: [q for q in positive_questions if split_of[q] == s] for s in SPLITS}
    return Dataset(
        name=name,
        description=description,
        corpus=corpus,
        queries={q: corpus[q] for q in positive_questions},
        qrels=qrels,
        pairs={"all": pairs, **pair_splits},
        query_splits=query_splits,
        ignore_identical_ids=True,
        tokenized=tokenized,
    )


# ----------------------------------------------------------------------------- file readers
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


def _read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (a leading BOM is dropped), read line by line.

    Refused with file and line: bytes that are not UTF-8, a NUL byte, and a line longer than the text
    limit allows (read no further than that: a 50 MB one-line file is not loaded into memory).
    """
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    limit = 16 * max_text_chars() + 4096  # bytes: two texts of 4-byte characters, JSON escapes, ids
    out: list[str] = []
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
                raise DataFormatError(path, len(out) + 1, f"the line is longer than {limit:,} bytes; texts are limited "
                                      f"to {max_text_chars():,} characters (set {MAX_TEXT_ENV} to raise it)")
            if first:
                raw, first = raw.removeprefix(b"\xef\xbb\xbf"), False
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(path, len(out) + 1, f"not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                                      "line); save the file as UTF-8") from None
            for piece in text.splitlines():  # same line breaks as str.splitlines on the whole file
                if "\x00" in piece:
                    raise DataFormatError(path, len(out) + 1, "contains a NUL byte")
                out.append(piece)
    return out


def _label(value: str, path: Path, lineno: int, max_label: int | None = None) -> int:
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
    for lineno, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) not in (3, 4) or (require_pair_id and len(cols) < 4):
            expected = "label<TAB>text1<TAB>text2<TAB>pair_id" if require_pair_id else "label<TAB>text1<TAB>text2[<TAB>pair_id]"
            raise DataFormatError(path, lineno, f"expected {expected}, got {len(cols)} column(s)")
        label = _label(cols[0], path, lineno, max_label=1)  # a pair is a duplicate (1) or not (0)
        t1, t2 = cols[1].strip(), cols[2].strip()
        if not t1 or not t2:
            raise DataFormatError(path, lineno, "empty question text")
        check_text(t1, path, lineno, "first question", limit)
        check_text(t2, path, lineno, "second question", limit)
        rows.append((label, t1, t2, cols[3].strip() if len(cols) > 3 else str(lineno)))
    if not rows:
        raise DataFormatError(path, None, "no pairs found")
    return rows


def load_qqp_bimpm(root: Path | None = None) -> Dataset:
    """QQP BiMPM dev + test: retrieval protocol and cluster-disjoint split (see module docstring)."""
    root = Path(root or data_dir() / "qqp-bimpm")
    rows = read_pairs_tsv(root / "dev.tsv", require_pair_id=True) + read_pairs_tsv(
        root / "test.tsv", require_pair_id=True
    )
    ds = dataset_from_pairs(
        "qqp-bimpm",
        "Quora Question Pairs (BiMPM partition, dev+test): every unique question is in the collection; "
        "queries are the questions of the positive pairs; relevant = same paraphrase cluster. "
        "Each query is dropped from its own ranking (ignore_identical_ids).",
        rows,
        tokenized=True,
    )
    ds.query_splits[PAPER_004_SPLIT] = paper_004_queries(ds)
    return ds


PAPER_004_SPLIT = "paper-004"


def paper_004_queries(ds: Dataset) -> list[str]:
    """tree-search-bert-guo.md §4.1: the first question of each positive pair is a query (10,000 pairs;
    a question that is the first of several pairs is one query: 9,027 distinct on QQP), in pair order."""
    return list(dict.fromkeys(p.id1 for p in ds.pairs["all"] if p.label > 0))


def load_pairs_dataset(path: str | Path) -> Dataset:
    """A user pairs TSV (``label \\t text1 \\t text2``) with the same protocol as QQP."""
    path = Path(path)
    return dataset_from_pairs(
        f"pairs:{path}",  # the loadable name: load_dataset(ds.name) gives the same dataset
        f"Pairs from {path.name}: retrieval protocol by paraphrase clusters (ignore_identical_ids).",
        read_pairs_tsv(path),
    )


# ----------------------------------------------------------------------------- reranking data
TRECQA_SPLITS = {
    "train": "train",
    "train-all": "train-all",  # 1,229 questions with automatic labels (gzipped; data/trecqa/PROVENANCE.md)
    "dev": "raw-dev",
    "test": "raw-test",
    "clean-dev": "clean-dev",
    "clean-test": "clean-test",
}


OPTIONAL_TRECQA_SPLITS = ("train-all",)  # a copy of the folders without it still loads


def _read_token_file(path: Path) -> list[str]:
    gz = path.with_name(path.name + ".gz")
    lines = _read_lines(gz if not path.is_file() and gz.is_file() else path)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def load_trecqa(root: Path | None = None) -> Dataset:
    """TrecQA from the tokenized folders: per question its candidate sentences with 0/1 labels.

    Query ids are ``<split>/<question id>``; candidate ids ``<split>/<question id>/<n>``. Questions
    without candidates have no rows in these files (see data/trecqa/PROVENANCE.md).
    """
    root = Path(root or data_dir() / "trecqa" / "toks")
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    candidates: dict[str, list[str]] = defaultdict(list)
    query_splits: dict[str, list[str]] = {}
    for split, folder in TRECQA_SPLITS.items():
        if split in OPTIONAL_TRECQA_SPLITS and not (root / folder).is_dir():
            continue
        files = {n: _read_token_file(root / folder / f"{n}") for n in ("a.toks", "b.toks", "id.txt", "sim.txt")}
        lengths = {n: len(v) for n, v in files.items()}
        if len(set(lengths.values())) != 1:
            raise DataFormatError(root / folder, None, f"files are not line-aligned: {lengths}")
        order: list[str] = []
        for i, (q, a, qid_raw, sim) in enumerate(
            zip(files["a.toks"], files["b.toks"], files["id.txt"], files["sim.txt"]), start=1
        ):
            qid = f"{split}/{qid_raw.strip()}"
            if qid not in queries:
                queries[qid] = q.strip()
                order.append(qid)
                qrels[qid] = {}
            did = f"{qid}/{len(candidates[qid])}"
            corpus[did] = a.strip()
            candidates[qid].append(did)
            qrels[qid][did] = _label(sim, root / folder / "sim.txt", i)
        query_splits[split] = order
    return Dataset(
        name="trecqa",
        description="TrecQA answer selection (TRAIN / TRAIN-ALL / DEV / raw and clean TEST): rerank each "
        "question's candidate sentences. Trainers read TRAIN; TRAIN-ALL is the split 'train-all' "
        "(automatic labels; see training_split_view).",
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        query_splits=query_splits,
        candidates=dict(candidates),
        tokenized=True,
    )


def training_split_view(dataset: Dataset, split: str | None = None, others: tuple[str, ...] = ()) -> Dataset:
    """``dataset`` trained on ``split``: its queries become the ``train`` split; the queries of ``others``
    (alternative training splits, e.g. TrecQA's ``train-all`` beside ``train``) and their candidates are
    removed, so vocabularies and IDF statistics see only the splits that are used. ``split=None``: keep
    ``train`` and only drop ``others``. Pairs are not carried: ``core.training_data.training_data`` rebuilds
    them from the kept splits."""
    if split is not None and split not in dataset.query_splits:
        raise UnknownNameError("query split", split, list(dataset.query_splits))
    dropped_splits = [s for s in others if s != split and s in dataset.query_splits]
    if split is not None and split != "train":
        dropped_splits.append("train")
    drop = {q for s in dropped_splits for q in dataset.query_splits.get(s, [])}
    if not drop and split in (None, "train"):
        return dataset
    keep_splits = {s: list(v) for s, v in dataset.query_splits.items() if s not in dropped_splits}
    if split not in (None, "train"):
        keep_splits["train"] = keep_splits.pop(split)
    drop_docs = {d for q in drop for d in dataset.candidates.get(q, [])}
    return dataclasses.replace(
        dataset,
        corpus={d: t for d, t in dataset.corpus.items() if d not in drop_docs},
        queries={q: t for q, t in dataset.queries.items() if q not in drop},
        qrels={q: r for q, r in dataset.qrels.items() if q not in drop},
        query_splits=keep_splits,
        candidates={q: c for q, c in dataset.candidates.items() if q not in drop},
        pairs={},  # a labelled-pairs view is rebuilt from the kept splits (core.training_data)
    )


def load_candidates_tsv(path: str | Path) -> Dataset:
    """A candidate-list TSV: ``qid \\t query \\t docid \\t doc \\t label`` (a reranking dataset)."""
    path = Path(path)
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    candidates: dict[str, list[str]] = defaultdict(list)
    limit = max_text_chars()
    for lineno, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 5:
            raise DataFormatError(path, lineno, f"expected 5 tab-separated columns (qid, query, docid, doc, label), got {len(cols)}")
        qid, query, did, doc, label = (c.strip() for c in cols)
        if not qid or not did or not query or not doc:
            raise DataFormatError(path, lineno, "empty qid, query, docid or doc")
        check_text(query, path, lineno, "query", limit)
        check_text(doc, path, lineno, "document", limit)
        if did in qrels.get(qid, {}):
            raise DataFormatError(path, lineno, f"duplicate row: query {qid!r} already has candidate {did!r}")
        if queries.setdefault(qid, query) != query:
            raise DataFormatError(path, lineno, f"query id {qid!r} has two different texts")
        if corpus.setdefault(did, doc) != doc:
            raise DataFormatError(path, lineno, f"doc id {did!r} has two different texts")
        qrels[qid][did] = _label(label, path, lineno)
        candidates[qid].append(did)
    if not queries:
        raise DataFormatError(path, None, "no rows found")
    if not any(v > 0 for rel in qrels.values() for v in rel.values()):
        raise DataFormatError(path, None, "no candidate has a positive label (>= 1): there is nothing to rank "
                              "towards; label at least one correct candidate")
    positive = {q for q, rel in qrels.items() if any(v > 0 for v in rel.values())}
    return Dataset(
        name=f"candidates:{path}",
        description=f"Candidate lists from {path.name} (reranking; train/dev/test split by query).",
        corpus=corpus,
        queries=queries,
        qrels=dict(qrels),
        query_splits=split_by_query(list(queries), positive),
        candidates=dict(candidates),
    )


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


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSON-lines file."""
    parsed = (parse_jsonl_line(path, lineno, line) for lineno, line in enumerate(_read_lines(path), start=1))
    return [(lineno, obj) for lineno, obj in enumerate(parsed, start=1) if obj is not None]


def beir_id(obj: dict, path: Path, lineno: int, seen: dict) -> str:
    """The ``_id`` of a BEIR line as a string; a repeated id is refused (the last copy would win)."""
    raw = obj["_id"]
    if not isinstance(raw, (str, int)) or isinstance(raw, bool) or not str(raw).strip():
        raise DataFormatError(path, lineno, f'"_id" must be a non-empty string, got {raw!r}'[:200])
    key = str(raw)
    if key in seen:
        raise DataFormatError(path, lineno, f"duplicate id {key!r} (already on an earlier line)")
    return key


def load_beir_folder(path: str | Path, split: str = "test") -> Dataset:
    """A BEIR-layout folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Like BEIR, a query whose id is also a corpus id is dropped from its own ranking. Queries get a
    deterministic train / dev / test split by query (``split_by_query``); ``all`` is every judged query.
    """
    root = Path(path)
    corpus: dict[str, str] = {}
    limit = max_text_chars()
    for lineno, obj in _read_jsonl(root / "corpus.jsonl"):
        doc_id = beir_id(obj, root / "corpus.jsonl", lineno, corpus)
        parts = []
        for key in ("title", "text"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise DataFormatError(root / "corpus.jsonl", lineno,
                                      f'"{key}" of document {doc_id!r} must be a string, got {type(value).__name__}')
            if value:
                parts.append(value)
        text = " ".join(parts).strip()
        if not text:
            raise DataFormatError(root / "corpus.jsonl", lineno, f"document {doc_id!r} has no title or text")
        corpus[doc_id] = check_text(text, root / "corpus.jsonl", lineno, "document", limit)
    queries: dict[str, str] = {}
    for lineno, obj in _read_jsonl(root / "queries.jsonl"):
        qid = beir_id(obj, root / "queries.jsonl", lineno, queries)
        value = obj.get("text")
        if not isinstance(value, str) or not value.strip():
            raise DataFormatError(root / "queries.jsonl", lineno, f'query {qid!r} needs a non-empty "text" string')
        queries[qid] = check_text(value.strip(), root / "queries.jsonl", lineno, "query", limit)
    qrels_path = root / "qrels" / f"{split}.tsv"
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for lineno, line in enumerate(_read_lines(qrels_path), start=1):
        cols = line.split("\t")
        if lineno == 1 and cols[0].strip().lower() in {"query-id", "query_id", "qid"}:
            continue
        if not line.strip():
            continue
        if len(cols) != 3:
            raise DataFormatError(qrels_path, lineno, f"expected query-id<TAB>corpus-id<TAB>score, got {len(cols)} column(s)")
        qid, did, score = cols[0].strip(), cols[1].strip(), cols[2]
        if qid not in queries:
            raise DataFormatError(qrels_path, lineno, f"query id {qid!r} is not in queries.jsonl")
        if did not in corpus:
            raise DataFormatError(qrels_path, lineno, f"corpus id {did!r} is not in corpus.jsonl")
        qrels[qid][did] = _label(score, qrels_path, lineno)
    judged = [q for q in queries if q in qrels]
    return Dataset(
        name=f"beir:{root}",
        description=f"BEIR folder {root.name} ({split} qrels).",
        corpus=corpus,
        queries={q: queries[q] for q in judged},
        qrels=dict(qrels),
        query_splits=split_by_query(judged, {q for q in judged if any(v > 0 for v in qrels[q].values())}),
        ignore_identical_ids=any(q in corpus for q in judged),
    )


# ----------------------------------------------------------------------------- registry
BUNDLED = {
    "qqp-bimpm": "Quora Question Pairs, BiMPM partition (bundled; default)",
    "trecqa": "TrecQA answer selection (bundled)",
}
DEFAULT_DATASET = "qqp-bimpm"


def imported_root() -> Path:
    """``var/datasets``: one folder per imported dataset (written by ``core.data.imports``)."""
    from core.paths import artifact_dir

    return artifact_dir("datasets")


def imported_datasets() -> dict[str, str]:
    """``user/<name>`` -> description, for every imported dataset."""
    out = {}
    for meta in sorted(imported_root().glob("*/meta.json")):
        info = json.loads(meta.read_text(encoding="utf-8"))
        out[f"user/{meta.parent.name}"] = f"imported {info['kind']} data from {info['source']}"
    return out


def load_imported(name: str) -> Dataset | None:
    """Load ``user/<name>`` (or None when there is no such import)."""
    if not name.startswith("user/"):
        return None
    folder = imported_root() / name.removeprefix("user/")
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    dataset = _PATH_LOADERS[meta["kind"]](folder / meta["file"])
    dataset.name = name
    return dataset


def list_datasets() -> dict[str, str]:
    """Bundled datasets plus any imported with ``python -m core data import``."""
    return {**BUNDLED, **imported_datasets()}


def load_dataset(name: str) -> Dataset:
    """Load a dataset by name: bundled, imported (``user/<name>``), or ``beir:``/``pairs:``/``candidates:`` + path."""
    if name == "qqp-bimpm":
        return load_qqp_bimpm()
    if name == "trecqa":
        return load_trecqa()
    kind, _, path = name.partition(":")
    if path and kind in _PATH_LOADERS:
        return _PATH_LOADERS[kind](path)
    imported = load_imported(name)
    if imported is not None:
        return imported
    raise UnknownNameError("dataset", name, list(list_datasets()) + ["beir:PATH", "pairs:PATH", "candidates:PATH"])


_PATH_LOADERS = {"beir": load_beir_folder, "pairs": load_pairs_dataset, "candidates": load_candidates_tsv}
