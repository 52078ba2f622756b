"""The only Streamlit cache loaders: datasets, systems, engines are loaded once per process.

Pages call these; everything they return comes from ``core``. Unhashable arguments are prefixed ``_``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import streamlit as st

from core.data.datasets import Dataset, load_dataset
from core.registry import get_spec
from core.registry import layer_sources as registered_layer_sources
from core.settings import settings
from ui.result_store import ResultCache


@st.cache_resource(show_spinner=False)
def autostart_build(name: str) -> bool:
    """Start the default build's missing systems once per server process and dataset (``QRS_AUTOBUILD=0`` disables
    it); nothing when every default system is ready (``core.build_plan``)."""
    from core.build_plan import build_missing

    if not settings().autobuild:
        return False
    return build_missing(dataset(name))


@st.cache_resource(show_spinner="Loading dataset…")
def dataset(name: str) -> Dataset:
    return load_dataset(name)


_LOADING: dict[Hashable, threading.Lock] = {}
_LOADING_GUARD = threading.Lock()


def system(name: str, dataset_name: str, variant: str | None = None, options: tuple = (), source: str = "",
           progress: bool = False, background: float | None = None):
    """A loaded retriever/reranker through the one loader (``core.serving.loader``; ``options`` is a tuple of
    (key, value) pairs, hashable), loaded once per process (``result_cache("systems")``, one load at a time per
    key). ``source`` keys a user system's model folder or run file (``core.user_systems.source_key``): a changed
    one loads anew. ``progress``: whatever the first use builds or encodes (an index, a zero-shot system's or a
    researcher's bi-encoder's collection vectors) draws a progress bar with its count and time left on the page;
    only a page's own call passes it, never one inside a ``st.cache_*`` function (that would replay the bar).
    ``background``: a deadline (``ui.background_loads.page_deadline``): a system not loaded yet loads on the
    background thread, awaited until then, else this call raises ``LoadingError`` (the page draws the rest and
    reruns when it is loaded)."""
    from core.serving.loader import load

    if variant and get_spec(name.split("@", 1)[0]).composite:
        return composite_system(name, variant, dataset_name)
    key = (name, dataset_name, variant, tuple(options), source)
    cache = result_cache("systems", 64)
    hit = cache.get(key, _MISSING)
    if hit is not _MISSING:
        return hit
    if background is not None:
        from ui.background_loads import in_background

        ds = dataset(dataset_name)
        return in_background(key, name + (f"@{variant}" if variant else ""),
                             lambda p: cache.put(key, load(name, ds, variant=variant, progress=p, **dict(options))),
                             lambda: cache.get(key), background)
    with _LOADING_GUARD:
        lock = _LOADING.setdefault(key, threading.Lock())
    with lock:
        hit = cache.get(key, _MISSING)
        if hit is _MISSING:
            bar = LoadBar(f"Loading {name}") if progress else None
            try:
                hit = load(name, dataset(dataset_name), variant=variant, progress=bar or _quiet, **dict(options))
            finally:
                if bar is not None:
                    bar.close()
            cache.put(key, hit)
    return hit


def _quiet(fraction: float, message: str) -> None:  # noqa: ARG001
    return None


class LoadBar:
    """A ``progress(fraction, message)`` drawing one Streamlit progress bar, created on the first report (a load
    that finds everything built draws nothing): the message (counts) and the time left estimated from the rate."""

    def __init__(self, title: str) -> None:
        import time

        self.title, self.bar, self.start, self._clock = title, None, time.monotonic(), time.monotonic

    def __call__(self, fraction: float, message: str) -> None:
        fraction = min(1.0, max(0.0, float(fraction)))
        elapsed = self._clock() - self.start
        left = f" · about {elapsed * (1 - fraction) / fraction:.0f} s left" if 0.0 < fraction < 1.0 else ""
        text = f"{self.title}: {message}{left if 'left' not in message else ''}"
        if self.bar is None:
            self.bar = st.progress(fraction, text=text)
        else:
            self.bar.progress(fraction, text=text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.empty()


def cached_loader(dataset_name: str, progress: bool = False, until: float | None = None):
    """The runner's ``(name, variant, options) -> system`` over this process's cached systems (``system``):
    ``progress`` draws first-use builds as a bar; ``until`` (a page run's deadline) loads off the page's thread."""
    from core.user_systems import source_key

    return lambda name, variant=None, options=(): system(name, dataset_name, variant, tuple(options), source_key(name),
                                                         progress, until)


@st.cache_resource(show_spinner="Loading the fused parts…", max_entries=32)
def composite_system(name: str, variant: str, dataset_name: str):
    """A composite system (a fused first stage, ``core.retrieval.fusion``) sharing this process's loaded parts.

    A built variant uses its dev-tuned parameters; one not built yet fuses live with the untuned
    defaults (RRF k = 60, equal weights), and says so in ``retriever.tuned`` / ``retriever.tuned_on``.
    Missing parts raise ``MissingArtifactError`` with their build command.
    """
    from core.serving.loader import load

    return load(name, dataset(dataset_name), variant=variant, loader=lambda n, v: system(n, dataset_name, v),
                untuned_ok=True)


# ----------------------------------------------------------------------------- judgments
@st.cache_resource(show_spinner=False)
def judgment_store(url: str):
    """The judgment store for a database URL (one engine per process; every call commits at once)."""
    from core.judging.judgments import JudgmentStore

    return JudgmentStore(url)


def judgment_labels(dataset_name: str, query_id: str | None, query: str) -> dict[str, int]:
    """Current user labels (majority over annotators) of one query: doc id -> label (Compare's 👤 mark).

    Read fresh on every call (a label set on Annotate shows at once); an empty or absent database gives {}.
    """
    from core.judging.database import default_url
    from core.judging.label_records import query_key

    store = judgment_store(default_url())
    return store.qrels(dataset_name).get(query_key(query_id, query), {})


@st.cache_data(show_spinner="Ranking for the pool…", max_entries=512)
def pool_ids(system_name: str, dataset_name: str, query: str, query_id: str | None, k: int) -> list[str]:
    """Top-k doc ids of one system for one query (rerankers rescore BM25's top 20)."""
    from core.judging.pooling import system_top_ids

    return system_top_ids(system_name, dataset(dataset_name), query, k, query_id, cached_loader(dataset_name))


@st.cache_data(show_spinner="Running the system over the queries…", max_entries=32)
def run_dict(system_name: str, dataset_name: str, queries: tuple[tuple[str, str], ...], k: int) -> dict:
    """One system's run over ``queries`` as ``{qid: {doc: score}}`` (same code as ``python -m core compare``)."""
    from core.analysis.compared_runs import system_runs

    (run,) = system_runs([system_name], dataset(dataset_name), dict(queries), k=k, loader=cached_loader(dataset_name))
    return run.to_dict()


# ----------------------------------------------------------------------------- layers
def layer_sources() -> list[str]:
    """The Layers page's representations (labels), from the systems' registrations."""
    return list(registered_layer_sources())


def layer_source(label: str) -> tuple[str, str | None, tuple]:
    """(system, variant, loader options) of one representation."""
    name, src = registered_layer_sources()[label]
    return name, src.variant, src.options


def default_layer_sources(dataset_name: str) -> list[str]:
    """The Layers page's representations that the default build builds for the dataset (what it preselects):
    a default-variant system of the default build; ablation variants (``-AllDense``) are offered, not chosen."""
    from core.registry import default_build, get_spec

    ds = dataset(dataset_name)
    return [label for label, (name, src) in registered_layer_sources().items()
            if src.variant is None and default_build(get_spec(name), ds)]


def layer_fn(label: str, dataset_name: str):
    """texts -> per-layer vectors for one representation of the Layers page."""
    name, src = registered_layer_sources()[label]
    retriever = system(name, dataset_name, src.variant, src.options)
    if src.pooling:
        return lambda texts: retriever.layer_embeddings(texts, pooling=src.pooling)
    return retriever.layer_embeddings


@st.cache_resource(show_spinner=False)
def result_cache(name: str, max_entries: int = 64) -> ResultCache:
    """The process-wide ``ResultCache`` called ``name`` (one per kind of result)."""
    return ResultCache(max_entries)


def memo(kind: str, key: Hashable, compute: Callable[[], object], max_entries: int = 64):
    """``compute()`` once per ``key`` for the process (plain data, kept in ``result_cache(kind)``)."""
    cache = result_cache(kind, max_entries)
    hit = cache.get(key, _MISSING)
    if hit is _MISSING:
        hit = compute()
        cache.put(key, hit)
    return hit


_MISSING = object()


def digest(obj) -> str:
    """A short content key of JSON-able data (labels, query sets) for the result caches."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def per_query_values(run_key: Hashable, name: str, data: Callable[[], dict], qrels: dict, qrels_key: str,
                     metrics: list[str], stored: Callable[[], dict | None] | None = None) -> dict[str, dict[str, float]]:
    """metric -> query -> value of one run (``core.evaluation.per_query_metrics``: ranx under the contract's tie
    rule), kept per run key (its
    model fingerprint, queries, depth) and labels: a widget that changes neither never recomputes them; a new
    metric computes only that metric. ``data()`` gives the run's ``{qid: {doc: score}}`` when something is missing."""
    from core.analysis.compared_runs import run_from_dict
    from core.evaluation import DEFAULT_TIES, per_query_metrics

    cache = result_cache("per_query", 1024)
    qrels_key = (qrels_key, DEFAULT_TIES)  # values under the contract's tie rule
    missing = [m for m in metrics if (run_key, qrels_key, m) not in cache]
    if missing and stored is not None:  # the build's per-query metrics (``core.analysis.runs.write_per_query``)
        saved = stored() or {}
        for m in [m for m in missing if m in saved]:
            cache.put((run_key, qrels_key, m), saved[m])
        missing = [m for m in missing if m not in saved]
    if missing:
        for m, values in per_query_metrics(qrels, run_from_dict(data(), name), missing, DEFAULT_TIES).items():
            cache.put((run_key, qrels_key, m), values)
    return {m: cache.get((run_key, qrels_key, m)) for m in metrics}


def layer_curve_cached(label: str, dataset_name: str, n: int, negatives: str, seed: int):
    """The stored curve for these settings, or None when it has not been computed yet."""
    return result_cache("layer_curve").get((label, dataset_name, n, negatives, seed))


def layer_curve(label: str, dataset_name: str, n: int, negatives: str, seed: int,
                progress: Callable[[float, str], None] | None = None):
    """Discriminativeness per layer on ``n`` sampled queries (densetrans-cai2021.md Figures 1, 3).

    Computed once per settings and process; ``progress(fraction, message)`` is called by the page's
    own code while computing (it is never stored, so a later session gets the curve and no replay).
    """
    from core.analysis.layers import HARD_NEGATIVES, discriminativeness, sample_triples

    key = (label, dataset_name, n, negatives, seed)
    cache = result_cache("layer_curve")
    hit = cache.get(key)
    if hit is not None:
        return hit
    ds = dataset(dataset_name)
    hard = system(HARD_NEGATIVES, dataset_name) if negatives == HARD_NEGATIVES else None
    triples = sample_triples(ds, n, negatives, bm25=hard, seed=seed)
    kwargs = {"progress": progress} if progress else {}
    curve = discriminativeness(label, layer_fn(label, dataset_name), triples, **kwargs)
    cache.put(key, curve)
    return curve


def _queries_key(queries: dict[str, str]) -> str:
    import hashlib

    digest = hashlib.sha1()
    for q in sorted(queries):
        digest.update(f"{q}\t{queries[q]}\n".encode())
    return digest.hexdigest()


def _run_fingerprint(ds, name: str) -> str:
    from core.analysis.runs import fingerprint

    system_name, _, variant = name.partition("@")
    return fingerprint(ds, system_name, variant or None)


def stored_run_keys(dataset_name: str, names: list[str], queries: dict[str, str], k: int,
                    query_form: str = "tokenized") -> dict[str, tuple]:
    """The cache key of each system's run over ``queries``: dataset, name, depth, queries, form, model fingerprint."""
    ds = dataset(dataset_name)
    qkey = _queries_key(queries)
    return {name: (dataset_name, name, k, qkey, query_form, _run_fingerprint(ds, name)) for name in names}


def stored_runs(dataset_name: str, names: list[str], queries: dict[str, str], k: int,
                progress: Callable[[float, str], None] | None = None, query_form: str = "tokenized") -> list[dict]:
    """Runs (``{qid: {doc: score}}``) of systems by name over ``queries`` for Error Analysis.

    Stored runs are read (``core.analysis.runs.load_run_dicts``); what is missing or stale is computed with
    ``progress(fraction, "system: n/N queries")`` drawn by the page. Results are kept per model
    fingerprint, queries and depth for the process (plain dicts: nothing of the page is stored).
    """
    from core.analysis.runs import load_run_dicts

    ds = dataset(dataset_name)
    cache = result_cache("stored_runs")
    keys = stored_run_keys(dataset_name, names, queries, k, query_form)
    missing = [name for name in names if keys[name] not in cache]
    if missing:
        runs = load_run_dicts(ds, missing, queries, k=k, progress=progress or (lambda f, m: None),
                              loader=cached_loader(dataset_name), query_form=query_form)
        for name, run in zip(missing, runs):
            cache.put(keys[name], run)
    return [cache.get(keys[name]) for name in names]


def imported_run(path, name: str) -> tuple[tuple, dict]:
    """(cache key, ``{qid: {doc: score}}``) of an imported TREC run file, read once per file version."""
    from pathlib import Path

    from core.analysis.compared_runs import load_run_file

    st_ = Path(path).stat()
    key = ("imported", str(path), st_.st_size, st_.st_mtime_ns, name)
    return key, memo("imported_runs", key, lambda: load_run_file(path, name).to_dict())


def recall_curve(system_name: str, dataset_name: str, split: str, max_queries: int, until: float) -> dict[int, float]:
    """Recall@k on held-out queries, once per process, computed on the background thread (awaited until ``until``,
    a page run's deadline; else ``ui.background_loads.LoadingError``)."""
    from core.analysis.layers import recall_curve as compute
    from ui.background_loads import in_background

    key, cache = (system_name, dataset_name, split, max_queries), result_cache("recall_curve", 32)
    work = lambda p: cache.put(key, compute(system(system_name, dataset_name), dataset(dataset_name),  # noqa: E731
                                            split=split, max_queries=max_queries))
    return in_background(("recall_curve", *key), system_name, work, lambda: cache.get(key), until,
                         doing="computing its Recall@k curve")


# ----------------------------------------------------------------------------- case studies
@st.cache_resource(show_spinner=False)
def case_store(url: str):
    """Saved case studies in the judgments database (shares ``judgment_store(url)``'s engine)."""
    from core.judging.casestudy_store import CaseStudyStore

    return CaseStudyStore(judgments=judgment_store(url))


@st.cache_resource(show_spinner=False)
def warm_evaluation(dataset_name: str):
    """Once per server process and dataset (its ids' width): compile ranx's numba code on the background thread
    (``core.evaluation.warm_up``); the returned ``ui.background_loads.Load`` says when it is done, so a page's
    first metrics wait for it only as long as the page run's budget allows."""
    from core.evaluation import warm_up
    from ui.background_loads import start_load

    ds = dataset(dataset_name)
    example_ids = tuple(list(ds.queries)[:2] + list(ds.corpus)[:3])
    return start_load(("evaluation warm-up", example_ids), "per-query metrics (compiling the evaluation)",
                      lambda progress: warm_up(example_ids))
