"""The labels error analysis evaluates on: the dataset's qrels, the user judgments of a store, or both.

Label sources (``LABEL_SOURCES``)
- ``dataset``: the dataset's qrels; negative labelled pairs (label 0) count as judged, not relevant.
- ``judgments``: the user judgments of the store (several annotators on one pair: majority vote,
  ties -> the most recent label).
- ``both``: the union; **a user judgment wins** over the dataset label for the same (query, doc).
The store is passed in (``LabelStore``), so analysis does not depend on the judging layer above it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.analysis import LABEL_SOURCES
from core.data.datasets import Dataset
from core.errors import UnknownNameError

PRECEDENCE = "user judgments win over dataset qrels for the same (query, doc)"

Qrels = dict[str, dict[str, int]]


class LabelStore(Protocol):
    """What error analysis reads from a judgments store (``core.judging.judgments.JudgmentStore`` is one);
    the store is passed in, so analysis does not depend on the judging layer above it."""

    def qrels(self, dataset: str, annotators: Sequence[str] | None = None,
              resolve: str = "majority") -> dict[str, dict[str, int]]: ...

    def query_texts(self, dataset: str) -> dict[str, str]: ...


@dataclass
class LabelSet:
    """Labels for evaluation: ``qrels`` (queries with a relevant item), ``judged`` (every label,
    including negatives, for unjudged rates), query texts, and the source name."""

    source: str
    qrels: Qrels
    judged: Qrels
    queries: dict[str, str]


def merge_qrels(dataset_qrels: Mapping[str, Mapping[str, int]], user_qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
    """Union of two label sets; the user label wins for a pair present in both (``PRECEDENCE``)."""
    out: Qrels = {q: dict(v) for q, v in dataset_qrels.items()}
    for q, docs in user_qrels.items():
        out.setdefault(q, {}).update(docs)
    return out


def dataset_labels(dataset: Dataset, split: str = "all") -> tuple[Qrels, dict[str, str]]:
    """Dataset qrels of a split plus its negative pairs as explicit 0 labels; query texts."""
    queries = dataset.split_queries(split)
    labels: Qrels = {q: dict(dataset.qrels.get(q, {})) for q in queries}
    for pair in dataset.pairs.get("all", []):
        if pair.label == 0:
            for a, b in ((pair.id1, pair.id2), (pair.id2, pair.id1)):
                if a in labels:
                    labels[a].setdefault(b, 0)
    return labels, queries


def qrels_label_set(dataset: Dataset, qrels: Mapping[str, Mapping[str, int]], source: str,
                    texts: Mapping[str, str] | None = None) -> LabelSet:
    """Labels from outside qrels (a judging campaign's export under its rule): judged pairs as given, queries
    with a relevant item scored; query texts from the dataset, else ``texts``."""
    judged = {q: dict(v) for q, v in qrels.items() if v}
    queries = {q: dataset.queries.get(q) or (texts or {}).get(q, "") for q in judged}
    rel = {q: v for q, v in judged.items() if any(label > 0 for label in v.values()) and queries.get(q)}
    return LabelSet(source, rel, judged, {q: queries[q] for q in rel})


def label_set(
    dataset: Dataset,
    store: LabelStore | None,
    source: str = "both",
    split: str = "all",
    annotators: Sequence[str] | None = None,
    resolve: str = "majority",
) -> LabelSet:
    """Build the labels of one source (see module docstring for the precedence)."""
    if source not in LABEL_SOURCES:
        raise UnknownNameError("label source", source, list(LABEL_SOURCES))
    judged: Qrels = {}
    queries: dict[str, str] = {}
    if source in ("dataset", "both"):
        judged, queries = dataset_labels(dataset, split)
    if source in ("judgments", "both") and store is not None:
        user = store.qrels(dataset.name, annotators, resolve)
        texts = store.query_texts(dataset.name)
        judged = merge_qrels(judged, user)
        for q in user:
            queries.setdefault(q, dataset.queries.get(q, texts.get(q, "")))
    qrels = {q: dict(v) for q, v in judged.items() if any(label > 0 for label in v.values()) and queries.get(q)}
    return LabelSet(source, qrels, {q: v for q, v in judged.items() if v}, {q: queries[q] for q in qrels})
