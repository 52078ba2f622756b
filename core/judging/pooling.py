"""Pooling for blind judging: the union of each system's top k, deduplicated and shuffled.

The order is a deterministic shuffle seeded by (dataset, query), so the same query shows the same
order to every annotator and after a reload, and no system's order leaks through. Each pool item
remembers which systems retrieved it and at what rank (1-based); the Annotate page hides this and
stores it with the label. Fused first stages (``core.retrieval.fusion``) are retrievers like any other: a built
fusion is in ``available_systems`` as ``fusion`` (the default ``bm25+minilm:rrf``) or
``fusion@PART+PART:METHOD``.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.data.datasets import Dataset
from core.retrieval.base import Ranking
from core.serving.loader import FIRST_STAGE
from core.serving.runner import Loader, SystemChoice, rank_one


@dataclass(frozen=True)
class PoolItem:
    """One candidate to judge: doc id and {system: rank} (hidden from the annotator)."""

    doc_id: str
    systems: dict[str, int] = field(default_factory=dict)


def shuffle_seed(dataset: str, query: str) -> int:
    """A stable 64-bit seed from the dataset and query text."""
    return int.from_bytes(hashlib.sha256(f"{dataset}\x00{query}".encode("utf-8")).digest()[:8], "big")


def build_pool(
    rankings: Mapping[str, Ranking | Sequence[str]],
    k: int,
    dataset: str,
    query: str,
    exclude: Sequence[str] = (),
) -> list[PoolItem]:
    """Union of the top ``k`` of every system (``Ranking`` or a list of doc ids), shuffled blind.

    ``exclude`` drops ids (e.g. the query's own id in QQP).
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    skip = set(exclude)
    seen: dict[str, dict[str, int]] = {}
    for system in sorted(rankings):
        ranked = rankings[system]
        ids = ranked.doc_ids if isinstance(ranked, Ranking) else list(ranked)
        rank = 0
        for doc in ids:
            if doc in skip:
                continue
            rank += 1
            if rank > k:
                break
            seen.setdefault(doc, {}).setdefault(system, rank)
    order = sorted(seen)  # canonical order before the seeded shuffle
    random.Random(shuffle_seed(dataset, query)).shuffle(order)
    return [PoolItem(doc, dict(seen[doc])) for doc in order]


def available_systems(dataset: Dataset) -> list[str]:
    """Systems that can rank the dataset now, trained models from other datasets included
    (``SYSTEM@TRAINED_ON``, see ``core.transfer.applicable_systems``)."""
    from core.registry import list_systems, system_module
    from core.transfer import applicable_systems

    names = applicable_systems(dataset)
    for spec in list_systems():  # every built variant of a composite joins as SYSTEM@VARIANT (the default one is
        if not spec.composite:   # plain SYSTEM), e.g. fusion@PART+PART:METHOD
            continue
        module = system_module(spec.name)
        names += [f"{spec.name}@{v}" for v in module.built_variants(dataset) if v != module.DEFAULT_VARIANT]
    return names


def pool_choices(dataset: Dataset) -> list[str]:
    """What Annotate and Error Analysis offer: :func:`available_systems` and every built variant of a composite
    system spelled out (``fusion@bm25+minilm:rrf`` too, beside plain ``fusion``), each once."""
    from core.registry import list_systems, system_module

    names = available_systems(dataset)
    for spec in list_systems():
        if spec.composite:
            names += [f"{spec.name}@{v}" for v in system_module(spec.name).built_variants(dataset)]
    return list(dict.fromkeys(names))


def system_top_ids(name: str, dataset: Dataset, query: str, k: int, query_id: str | None = None,
                   load: Loader | None = None) -> list[str]:
    """Top-``k`` doc ids of system ``name`` for one query through the one runner (the query's own id
    dropped in QQP; a reranker rescores BM25's top 20, or the query's own candidates)."""
    from core.registry import get_spec

    choice = SystemChoice(name, first_stage=FIRST_STAGE if get_spec(name).kind == "reranker" else None)
    return rank_one(choice, dataset, query, k, query_id, load).doc_ids
