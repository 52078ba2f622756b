"""The only Streamlit cache loaders: datasets, systems, engines are loaded once per process.

Pages call these; everything they return comes from ``core``. Unhashable arguments are prefixed ``_``.
"""
from __future__ import annotations

import streamlit as st

from core.data import Dataset, load_dataset


@st.cache_resource(show_spinner="Loading dataset…")
def dataset(name: str) -> Dataset:
    return load_dataset(name)


@st.cache_resource(show_spinner="Loading model…", max_entries=64)
def system(name: str, dataset_name: str, variant: str | None = None, options: tuple = ()):
    """A loaded retriever/reranker (``options`` is a tuple of (key, value) pairs, hashable)."""
    from core.registry import load_system

    return load_system(name, dataset(dataset_name), variant=variant, **dict(options))


# ----------------------------------------------------------------------------- judgments (issue 7)
@st.cache_resource(show_spinner=False)
def judgment_store(url: str):
    """The judgment store for a database URL (one engine per process; every call commits at once)."""
    from core.judgments import JudgmentStore

    return JudgmentStore(url)


@st.cache_data(show_spinner="Ranking for the pool…", max_entries=512)
def pool_ids(system_name: str, dataset_name: str, query: str, query_id: str | None, k: int) -> list[str]:
    """Top-k doc ids of one system for one query (rerankers rescore BM25's top 20)."""
    from core.pooling import system_top_ids
    from core.registry import get_spec

    first = system("bm25", dataset_name) if get_spec(system_name).kind == "reranker" else None
    return system_top_ids(system(system_name, dataset_name), dataset(dataset_name), query, k, query_id, first)


@st.cache_data(show_spinner="Running the system over the queries…", max_entries=32)
def run_dict(system_name: str, dataset_name: str, queries: tuple[tuple[str, str], ...], k: int) -> dict:
    """One system's run over ``queries`` as ``{qid: {doc: score}}`` (same code as ``python -m core compare``)."""
    from core.error_analysis import system_runs

    (run,) = system_runs([system_name], dataset(dataset_name), dict(queries), k=k,
                         loader=lambda name, _ds: system(name, dataset_name))
    return run.to_dict()


# ----------------------------------------------------------------------------- layers (issue 6)
LAYER_SOURCES = {
    "MiniLM [CLS]": ("minilm", None, "cls"),
    "MiniLM mean": ("minilm", None, "mean"),
    "DenseTrans": ("densetrans", None, None),
    "DenseTrans -AllDense": ("densetrans", "-AllDense", None),
}


def layer_fn(label: str, dataset_name: str):
    """texts -> per-layer vectors for one representation of the Layers page."""
    name, variant, pooling = LAYER_SOURCES[label]
    retriever = system(name, dataset_name, variant, (("index", "flat"),) if name == "densetrans" else ())
    if pooling:
        return lambda texts: retriever.layer_embeddings(texts, pooling=pooling)
    return retriever.layer_embeddings


@st.cache_data(show_spinner=False, max_entries=64)
def layer_curve(label: str, dataset_name: str, n: int, negatives: str, seed: int, _progress=None):
    """Discriminativeness per layer on ``n`` sampled queries (cached per settings)."""
    from core.layers import discriminativeness, sample_triples

    ds = dataset(dataset_name)
    bm25 = system("bm25", dataset_name) if negatives == "bm25" else None
    triples = sample_triples(ds, n, negatives, bm25=bm25, seed=seed)
    kwargs = {"progress": _progress} if _progress else {}
    return discriminativeness(label, layer_fn(label, dataset_name), triples, **kwargs)


@st.cache_data(show_spinner="Computing Recall@k on held-out queries…", max_entries=32)
def recall_curve(system_name: str, dataset_name: str, split: str, max_queries: int) -> dict[int, float]:
    from core.layers import recall_curve as compute

    return compute(system(system_name, dataset_name), dataset(dataset_name), split=split, max_queries=max_queries)


# ----------------------------------------------------------------------------- case studies (issue 9)
@st.cache_resource(show_spinner=False)
def case_store(url: str):
    """Saved case studies in the judgments database (shares ``judgment_store(url)``'s engine)."""
    from core.casestudy_store import CaseStudyStore

    return CaseStudyStore(judgments=judgment_store(url))
