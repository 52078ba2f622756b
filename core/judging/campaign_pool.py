"""A campaign's items from a dataset: choose the queries (``QuerySet``), pool the systems' top k with
``core.judging.pooling.build_pool`` (blind, seeded shuffle), and turn the pool into ``ItemSpec`` rows.

``items_from_rankings`` takes the rankings as data ({query id: {system: [doc ids]}}), so tests and
callers that already have runs need no system; ``rank_pool`` produces those rankings through the one
runner: each system is loaded once and ranks every query in one ``rank_many`` call (a first stage shared
by several rerankers is loaded once too). An explicit pool ({query id: [doc ids]}) goes through
``build_pool`` as one ranking named ``given``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.data.datasets import Dataset
from core.judging.campaign_records import CampaignError, ItemSpec, QuerySet
from core.judging.pooling import build_pool
from core.serving.runner import Loader


def choose_queries(ds: Dataset, query_set: QuerySet) -> list[str]:
    """The query ids a campaign judges (the split's ids for a split or a sample; checked ids for a list)."""
    split = "all" if query_set.kind == "list" else query_set.split
    try:
        available = list(ds.split_queries(split))
    except Exception as exc:  # an unknown split: UnknownNameError names the known ones
        raise CampaignError(str(exc)) from None
    chosen = query_set.select(available)
    if not chosen:
        raise CampaignError(f"the query set ({query_set.describe()}) of {ds.name} is empty")
    return chosen


def items_from_rankings(ds: Dataset, rankings: Mapping[str, Mapping[str, Sequence[str]]], depth: int) -> list[ItemSpec]:
    """Pool each query's rankings ({qid: {system: [doc ids]}}) to depth ``depth``: blind, shuffled items."""
    out: list[ItemSpec] = []
    for qid, by_system in rankings.items():
        if qid not in ds.queries:
            raise CampaignError(f"{ds.name} has no query {qid!r}")
        unknown = [d for ids in by_system.values() for d in ids if d not in ds.corpus]
        if unknown:
            raise CampaignError(f"{ds.name} has no document {unknown[0]!r} (query {qid})")
        exclude = [qid] if ds.ignore_identical_ids else []
        for p in build_pool({k: list(v) for k, v in by_system.items()}, depth, ds.name, ds.queries[qid], exclude=exclude):
            out.append(ItemSpec(qid, ds.queries[qid], p.doc_id, ds.corpus[p.doc_id], dict(p.systems),
                                query_shown=ds.display_query(qid), doc_shown=ds.display(p.doc_id)))
    return out


def items_from_pool(ds: Dataset, pool: Mapping[str, Sequence[str]]) -> list[ItemSpec]:
    """An explicit pool {qid: [doc ids]} as items (one ranking named ``given``, every id kept)."""
    depth = max((len(v) for v in pool.values()), default=1) or 1
    return items_from_rankings(ds, {q: {"given": list(ids)} for q, ids in pool.items()}, depth)


def once(load: Loader) -> Loader:
    """``load`` remembering what it loaded: each (system, variant, options) is loaded once."""
    loaded: dict = {}

    def cached(name: str, variant: str | None = None, options: tuple = ()):
        key = (name, variant, tuple(options))
        if key not in loaded:
            loaded[key] = load(name, variant, options)
        return loaded[key]

    return cached


def rank_pool(ds: Dataset, query_ids: Sequence[str], systems: Sequence[str], depth: int,
              load: Loader | None = None) -> dict[str, dict[str, list[str]]]:
    """Each system's top ``depth`` for each query through the one runner: one load and one ``rank_many``
    per system (a reranker rescores BM25's top 20, or the query's own candidate list; QQP drops the query's
    own id)."""
    from core.registry import get_spec
    from core.serving.loader import FIRST_STAGE
    from core.serving.runner import SystemChoice, loader_for, rank_many

    if not systems:
        raise CampaignError("name at least one system to pool")
    load = once(load or loader_for(ds))
    queries = {q: ds.queries[q] for q in query_ids}
    out: dict[str, dict[str, list[str]]] = {q: {} for q in query_ids}
    for name in systems:
        choice = SystemChoice(name, first_stage=FIRST_STAGE if get_spec(name).kind == "reranker" else None)
        rankings = rank_many(choice, ds, queries, k=depth, load=load)
        for q in query_ids:
            out[q][name] = list(rankings[q].doc_ids)[:depth] if q in rankings else []
    return out
