"""What a dataset is: a collection (id -> text), queries, qrels, labelled pairs, named query splits, candidate
lists (``Dataset``, ``Pair``). The loaders are ``core.data.loaders``; a dataset by name is
``core.data.datasets.load_dataset``."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.data.text import display_form
from core.errors import UnknownNameError

SPLITS = ("train", "dev", "test")
QUERY_FORMS = ("tokenized", "typed")  # a dataset query as stored, or as people type it (its display form)


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
