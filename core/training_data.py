"""Training on any dataset with labels: one labelled-pairs view, one deterministic split, the same trainers.

Every trainer (DenseTrans, SDML-CNN, FRM, cross-encoder, fine-tuned MiniLM, CNN) reads the QQP
protocol: ``pairs["train" | "dev" | "test"]`` of (id1, id2, label) into ``corpus``, ``query_splits``
and positive ``qrels``. ``training_data(dataset)`` gives that view of any labelled dataset:

- **pairs TSV / QQP**: the dataset itself; split = connected components of all pairs, so every
  paraphrase cluster stays whole (``core.data.clusters.split_by_component``).
- **BEIR (qrels)**: (query, relevant document) positives (grade > 0) and, per query, its top
  ``negatives`` BM25 documents that are not judged relevant as label-0 pairs; split by query.
- **candidate lists**: (query, candidate, label) pairs; split by query (TrecQA keeps its own
  TRAIN / DEV / TEST).

The split by query is a stable hash of the query id cut at 80 / 10 / 10 (``core.data.clusters.cluster_split``);
on tiny data the highest-hashed training queries move to an empty dev or test split so that every
split has a query with a relevant item. Query texts are looked up through the view's ``corpus`` (a
query id that clashes with a different document gets the prefix ``query:``), while iterating the
corpus still gives exactly the dataset's collection, so what a trainer indexes is the real collection.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.data.clusters import split_by_query
from core.data.dataset_model import SPLITS
from core.data.datasets import Dataset, Pair
from core.errors import StudioError

QUERY_PREFIX = "query:"
DEFAULT_NEGATIVES = 3  # BM25 negatives per BEIR query (QQP's training split is 37 % positive)


class TextsWithQueries(dict):
    """The collection (iteration, ``len``, ``values``) whose lookups also resolve query ids."""

    def __init__(self, corpus: Mapping[str, str], queries: Mapping[str, str]) -> None:
        super().__init__(corpus)
        self.query_texts = dict(queries)

    def __missing__(self, key: str) -> str:
        if key in self.query_texts:
            return self.query_texts[key]
        raise KeyError(key)

    def get(self, key, default=None):  # noqa: ANN001 - dict signature
        return self[key] if key in self or key in self.query_texts else default


@dataclass
class TrainingData:
    """A labelled dataset in the QQP training protocol, and how it was split."""

    dataset: Dataset
    source: str  # "pairs", "qrels" or "candidates"
    unit: str  # what the split keeps whole
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"{s} {v['queries']:,} queries / {v['pairs']:,} pairs ({v['positives']:,} positive)"
                 for s, v in self.sizes.items()]
        return f"{self.dataset.name}: {self.source} split by {self.unit}: " + "; ".join(parts)


def split_queries(qids: list[str], positive: set[str]) -> dict[str, list[str]]:
    """Deterministic 80/10/10 split by query (``core.data.clusters.split_by_query``: the split imported data carries)."""
    if len(positive) < 3:
        raise StudioError(f"training needs at least 3 queries with a relevant item (train, dev, test); "
                          f"this dataset has {len(positive)}")
    return split_by_query(qids, positive)


def _sizes(pairs: dict[str, list[Pair]], query_splits: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    return {s: {"queries": len(query_splits.get(s, [])), "pairs": len(pairs.get(s, [])),
                "positives": sum(p.label > 0 for p in pairs.get(s, []))} for s in SPLITS}


def _query_ids(dataset: Dataset) -> dict[str, str]:
    """Original query id -> id in the view (prefixed only where it names a different document)."""
    return {q: (QUERY_PREFIX + q if q in dataset.corpus and dataset.corpus[q] != t else q)
            for q, t in dataset.queries.items()}


def _bm25_negatives(dataset: Dataset, qids: list[str], negatives: int) -> dict[str, list[str]]:
    from core.retrieval.bm25 import BM25Retriever

    retriever = BM25Retriever.index(dataset.corpus)
    depth = negatives + max((len(dataset.qrels.get(q, {})) for q in qids), default=0) + 1
    hits = retriever.retrieve([dataset.queries[q] for q in qids], depth)
    out = {}
    for q, ids in zip(qids, hits.ids):
        judged = {d for d, v in dataset.qrels.get(q, {}).items() if v > 0}
        out[q] = [d for d in ids if d not in judged and d != q][:negatives]
    return out


def training_data(dataset: Dataset, negatives: int = DEFAULT_NEGATIVES) -> TrainingData:
    """The labelled-pairs view of ``dataset`` (see module docstring); ``StudioError`` without labels."""
    if dataset.pairs.get("train"):
        if not any(p.label > 0 for p in dataset.pairs["train"]):
            raise StudioError(f"{dataset.name} has no positive pair in its training split: nothing to learn from")
        return TrainingData(dataset, "pairs", "paraphrase cluster (connected component of all pairs)",
                            _sizes(dataset.pairs, dataset.query_splits))
    positive = {q for q, rel in dataset.qrels.items() if any(v > 0 for v in rel.values()) and q in dataset.queries}
    if not positive:
        raise StudioError(f"{dataset.name} has no labels to train on (no query has a relevant item); "
                          "import pairs, qrels or candidate lists with labels >= 1")
    vid = _query_ids(dataset)
    qids = list(dataset.queries)
    given = dataset.query_splits
    if given.get("train") and given.get("dev") and any(q in positive for q in given["train"]):
        splits = {s: list(given.get(s, [])) for s in SPLITS}
        unit = ("query (the dataset's own TRAIN / DEV / TEST)" if dataset.name == "trecqa" else
                "query (stable hash of the query id, 80/10/10)")
    else:
        splits = split_queries(qids, positive)
        unit = "query (stable hash of the query id, 80/10/10)"
    if dataset.candidates:
        rows = {q: [(d, int(dataset.qrels.get(q, {}).get(d, 0))) for d in dataset.candidates.get(q, [])] for q in qids}
        source = "candidates"
    else:
        negs = _bm25_negatives(dataset, qids, negatives)
        rows = {q: [(d, v) for d, v in dataset.qrels.get(q, {}).items() if v > 0] + [(d, 0) for d in negs[q]]
                for q in qids}
        source = "qrels"
    pairs = {s: [Pair(vid[q], d, label, f"{q}\t{d}") for q in splits[s] for d, label in rows[q]] for s in SPLITS}
    pairs["all"] = [p for s in SPLITS for p in pairs[s]]
    if not any(p.label > 0 for p in pairs["train"]):
        raise StudioError(f"{dataset.name} has no positive label in its training split: nothing to learn from")
    view = Dataset(
        name=dataset.name,
        description=dataset.description + " [training view: labelled pairs]",
        corpus=TextsWithQueries(dataset.corpus, {vid[q]: t for q, t in dataset.queries.items()}),
        queries={vid[q]: t for q, t in dataset.queries.items()},
        qrels={vid[q]: {d: v for d, v in rel.items() if v > 0} for q, rel in dataset.qrels.items() if q in vid},
        pairs=pairs,
        query_splits={**{s: [vid[q] for q in splits[s]] for s in SPLITS},  # named extra splits kept (TrecQA's train-all)
                      **{s: [vid[q] for q in v] for s, v in given.items() if s not in SPLITS and s != "all"}},
        candidates={vid[q]: list(c) for q, c in dataset.candidates.items() if q in vid},
        ignore_identical_ids=dataset.ignore_identical_ids,
        tokenized=dataset.tokenized,
    )
    return TrainingData(view, source, unit, _sizes(pairs, view.query_splits))
