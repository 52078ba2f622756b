"""Paraphrase clusters of labelled pairs (transitive closure of the positive pairs), the deterministic
cluster-disjoint train / dev / test split, and a retrieval dataset built from pairs (``dataset_from_pairs``:
the QQP protocol, see ``core.data.loaders``)."""
from __future__ import annotations

import hashlib
from collections import defaultdict

from core.data.dataset_model import SPLITS, Dataset, Pair

SPLIT_FRACTIONS = (0.8, 0.1, 0.1)


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
