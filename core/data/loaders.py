"""The dataset loaders: bundled QQP and TrecQA, and bring-your-own pairs TSV, candidate-list TSV and BEIR folders.

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
from collections import defaultdict
from collections.abc import Container, Iterator
from pathlib import Path

from core.data.clusters import dataset_from_pairs, split_by_query
from core.data.dataset_model import Dataset
from core.data.readers import (beir_id, check_id, check_text, iter_jsonl, iter_lines, max_text_chars,
                               read_label, read_lines, read_pairs_tsv)
from core.errors import DataFormatError, UnknownNameError
from core.paths import data_dir


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
    lines = read_lines(gz if not path.is_file() and gz.is_file() else path)
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
            qrels[qid][did] = read_label(sim, root / folder / "sim.txt", i)
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
    for lineno, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 5:
            raise DataFormatError(path, lineno, f"expected 5 tab-separated columns (qid, query, docid, doc, label), got {len(cols)}")
        qid, query, did, doc, label = (c.strip() for c in cols)
        if not qid or not did or not query or not doc:
            raise DataFormatError(path, lineno, "empty qid, query, docid or doc")
        check_id(qid, path, lineno, "query id")
        check_id(did, path, lineno, "document id")
        check_text(query, path, lineno, "query", limit)
        check_text(doc, path, lineno, "document", limit)
        if did in qrels.get(qid, {}):
            raise DataFormatError(path, lineno, f"duplicate row: query {qid!r} already has candidate {did!r}")
        if queries.setdefault(qid, query) != query:
            raise DataFormatError(path, lineno, f"query id {qid!r} has two different texts")
        if corpus.setdefault(did, doc) != doc:
            raise DataFormatError(path, lineno, f"doc id {did!r} has two different texts")
        qrels[qid][did] = read_label(label, path, lineno)
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


def beir_documents(root: Path, seen: Container[str] | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) of each line of ``root/corpus.jsonl``, read one line at a time: ``title`` and ``text`` joined by a
    space, non-empty, within the text limit; an id already in ``seen`` (the caller adds each one) is refused."""
    path, limit, seen = root / "corpus.jsonl", max_text_chars(), {} if seen is None else seen
    for lineno, obj in iter_jsonl(path):
        doc_id = beir_id(obj, path, lineno, seen)
        parts = []
        for key in ("title", "text"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise DataFormatError(path, lineno,
                                      f'"{key}" of document {doc_id!r} must be a string, got {type(value).__name__}')
            if value:
                parts.append(value)
        text = " ".join(parts).strip()
        if not text:
            raise DataFormatError(path, lineno, f"document {doc_id!r} has no title or text")
        yield doc_id, check_text(text, path, lineno, "document", limit)


def beir_queries(root: Path, seen: Container[str] | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) of each line of ``root/queries.jsonl``, one line at a time (as ``beir_documents``)."""
    path, limit, seen = root / "queries.jsonl", max_text_chars(), {} if seen is None else seen
    for lineno, obj in iter_jsonl(path):
        qid = beir_id(obj, path, lineno, seen)
        value = obj.get("text")
        if not isinstance(value, str) or not value.strip():
            raise DataFormatError(path, lineno, f'query {qid!r} needs a non-empty "text" string')
        yield qid, check_text(value.strip(), path, lineno, "query", limit)


def beir_qrels(root: Path, split: str, queries: Container[str], corpus: Container[str]
               ) -> Iterator[tuple[str, str, int]]:
    """(query id, corpus id, label) of each row of ``root/qrels/<split>.tsv`` (a header row skipped), one line at
    a time; both ids must be known (``queries``, ``corpus``)."""
    qrels_path = root / "qrels" / f"{split}.tsv"
    for lineno, line in enumerate(iter_lines(qrels_path), start=1):
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
        yield qid, did, read_label(score, qrels_path, lineno)


def load_beir_folder(path: str | Path, split: str = "test") -> Dataset:
    """A BEIR-layout folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` (BEIR's Quora and each
    CQADupStack forum are such folders).

    Like BEIR, a query whose id is also a corpus id is dropped from its own ranking. Queries get a
    deterministic train / dev / test split by query (``split_by_query``); ``all`` is every judged query.
    """
    root = Path(path)
    corpus: dict[str, str] = {}
    for doc_id, text in beir_documents(root, corpus):
        corpus[doc_id] = text
    queries: dict[str, str] = {}
    for qid, text in beir_queries(root, queries):
        queries[qid] = text
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for qid, did, label in beir_qrels(root, split, queries, corpus):
        qrels[qid][did] = label
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
