"""Stored runs: each built system's ranking of the dataset's queries as a TREC file, kept with the artifacts.

The build (``core.build``) writes, after each system builds (or when an already built system has no
fresh run), ``var/stored-runs/<dataset>/<system>[@variant].trec`` (``qid Q0 docid rank score tag``,
depth ``STORED_DEPTH`` = 100), its ``.npz`` twin (the same run as arrays: reading it is ~50x faster
than parsing 1.7M TREC lines) and a ``.json`` beside it with the fingerprint of the model it came
from, and a ``.perquery.json`` with its per-query metrics (``error_analysis.ANALYSIS_METRICS`` on the dataset's qrels of
``default_split``: what Error Analysis opens on, read instead of evaluated). The fingerprint hashes the
system's ``config.json`` and ``metrics.json`` (content) and the name, size and modification time of every
other file in ``registry.system_dir`` (weights, indexes); a fusion adds its parts' fingerprints, a reranker
the first stage's. A run whose fingerprint no longer matches is stale: it is not used, and the next build rewrites it.

Which queries
    - retrievers: every query of the dataset (QQP: 17,269), each query removed from its own ranking
      (``ignore_identical_ids``);
    - rerankers: the queries of ``default_split`` (QQP: the 1,781 test queries), rescoring
      ``FIRST_STAGE`` (bm25)'s top ``RERANK_DEPTH`` (20), or the dataset's own candidate lists;
    - not stored: systems whose registration gives a ``not_stored`` reason (the interaction tree search costs
      seconds per query).

API for the Error Analysis page (``pages/5_Error_Analysis.py``)::

    from core.analysis.runs import default_split, load_runs
    split = default_split(ds)                       # "test" where the dataset has one, else "all"
    runs = load_runs(ds, names, labels.queries, k=100,  # names: SYSTEM[@VARIANT]...
                     progress=lambda fraction, message: bar.progress(fraction, text=message))
    # -> list[ranx.Run], named as asked. Stored runs are read (well under a second each on QQP);
    # whatever is missing or stale is computed for just those queries, and ``progress`` reports
    # counts ("minilm: 512/1,781 queries"). Nothing is written by the page.

Other entry points: ``write_run(dataset, system, variant)`` (what the build calls),
``stored_run(dataset, system, variant)`` (a fresh stored run or ``None``), ``run_status(...)``.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from ranx import Run

from core.data import trec
from core.data.datasets import Dataset
from core.evaluation import DEFAULT_TIES
from core.paths import artifact_dir
from core.registry import SystemName, get_spec, parse_name, slug, system_module
from core.retrieval.base import ProgressFn, Ranking, no_progress
from core.serving.loader import FIRST_STAGE, RERANK_DEPTH
from core.serving.runner import Loader, SystemChoice, rank_many

STORED_DEPTH = 100
# bumped when the ranking code changes what a run holds for the same model files (every stored run goes stale):
# 2 = BM25 cuts a score tie at rank k by collection position (core.retrieval.base.order_ties)
RUNS_VERSION = 2
_JSON_FILES = ("config.json", "metrics.json")


# ----------------------------------------------------------------------------- where, and fingerprints
def default_split(dataset: Dataset) -> str:
    """The split Error Analysis opens on: ``test`` where the dataset has a non-empty one, else ``all``."""
    return "test" if dataset.query_splits.get("test") else "all"


def _leaf(system: str, variant: str | None) -> str:
    return system if not variant else f"{system}@{slug(variant)}"


def run_path(dataset_name: str, system: str, variant: str | None = None) -> Path:
    """``var/stored-runs/<dataset>/<system>[@variant].trec``."""
    return artifact_dir("stored-runs", slug(dataset_name)) / f"{_leaf(system, variant)}.trec"


def _folder_fingerprint(folder: Path) -> list:
    items = []
    if not folder.is_dir():
        return items
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = str(path.relative_to(folder))
        if path.name in _JSON_FILES:
            items.append((rel, hashlib.sha1(path.read_bytes()).hexdigest()))
        else:
            st = path.stat()
            items.append((rel, st.st_size, st.st_mtime_ns))
    return items


def _model_folders(dataset: Dataset, system: str, variant: str | None) -> list[Path]:
    """The artifact folders a run depends on, without creating any: ``<system>@<variant>``; for the default
    variant ``<system>/`` when the build made one (so building an ablation such as ``densetrans@-AllDense`` or
    ``bm25@classic`` leaves the default's stored run and held-out verdict fresh), else (a module that names its
    default's folder, e.g. ``minilm@mean``) every ``<system>@*`` but the recipes built beside it
    (``registry.Recipe``)."""
    from core.paths import var_dir

    root = var_dir() / "systems" / slug(dataset.name)
    if variant:
        return [root / _leaf(system, variant)]
    if (root / system).is_dir():
        return [root / system]
    beside = {_leaf(system, r.variant) for r in get_spec(system).recipes}
    return sorted(p for p in root.glob(f"{system}@*") if p.is_dir() and p.name not in beside)


def fingerprint(dataset: Dataset, system: str, variant: str | None = None) -> str:
    """sha1 of what the run depends on: the model files, the parts / first stage, the depth."""
    spec = get_spec(system)
    items: list = [RUNS_VERSION, system, variant, STORED_DEPTH, len(dataset.corpus), len(dataset.queries),
                   [(f.name, _folder_fingerprint(f)) for f in _model_folders(dataset, system, variant)]]
    if spec.composite:
        items.append([fingerprint(dataset, s, v) for s, v in system_module(system).parts(variant)])
    elif spec.kind == "reranker" and not dataset.candidates:
        items.append((FIRST_STAGE, RERANK_DEPTH, fingerprint(dataset, FIRST_STAGE)))
    return hashlib.sha1(json.dumps(items, default=str).encode()).hexdigest()


def stored_queries(dataset: Dataset, system: str) -> dict[str, str]:
    """The queries a stored run of ``system`` covers (see the module docstring)."""
    if get_spec(system).kind == "reranker":
        return dataset.split_queries(default_split(dataset))
    return dict(dataset.queries)


def _meta(path: Path) -> dict:
    try:
        return json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def run_status(dataset: Dataset, system: str, variant: str | None = None) -> str:
    """``fresh``, ``stale`` (the model changed), ``missing`` or ``not stored`` (``SystemSpec.not_stored``)."""
    if get_spec(system).not_stored:
        return "not stored"
    path = run_path(dataset.name, system, variant)
    if not path.is_file():
        return "missing"
    return "fresh" if _meta(path).get("fingerprint") == fingerprint(dataset, system, variant) else "stale"


# ----------------------------------------------------------------------------- computing
def compute_rankings(name: str, dataset: Dataset, queries: Mapping[str, str], k: int = STORED_DEPTH,
                     progress: ProgressFn = no_progress, loader: Loader | None = None) -> dict[str, Ranking]:
    """Rankings of system ``name`` over ``queries`` through the one runner (rerankers rescore bm25's top 20
    or the candidates)."""
    parsed = parse_name(name)
    spec = SystemChoice(str(SystemName(parsed.system, None, parsed.trained_on)), parsed.variant,
               FIRST_STAGE if get_spec(parsed.system).kind == "reranker" else None, RERANK_DEPTH)
    return rank_many(spec, dataset, queries, k, progress, load=loader)


def write_npz(rankings: Mapping[str, Ranking], path: Path) -> Path:
    """The same run as numpy arrays (``<run>.npz``: query ids, offsets, doc indexes, scores) for fast reads."""
    qids = sorted(q for q in rankings if rankings[q].doc_ids)
    docs = sorted({d for q in qids for d in rankings[q].doc_ids})
    index = {d: i for i, d in enumerate(docs)}
    counts = np.fromiter((len(rankings[q].doc_ids) for q in qids), dtype=np.int64, count=len(qids))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    doc = np.fromiter((index[d] for q in qids for d in rankings[q].doc_ids), dtype=np.int32, count=int(offsets[-1]))
    score = np.fromiter((x for q in qids for x in rankings[q].scores), dtype=np.float64, count=int(offsets[-1]))
    target = path.with_suffix(".npz")
    tmp = target.with_name(target.stem + f".tmp{os.getpid()}.npz")
    np.savez(tmp, qids=np.array(qids, dtype=str), docs=np.array(docs, dtype=str), offsets=offsets, doc=doc, score=score)
    os.replace(tmp, target)
    return target


def _read_npz(path: Path, queries: Sequence[str] | None, k: int | None) -> dict[str, dict[str, float]]:
    with np.load(path, allow_pickle=False) as z:
        qids, docs, offsets, doc, score = z["qids"].tolist(), z["docs"], z["offsets"], z["doc"], z["score"]
    row = {q: i for i, q in enumerate(qids)}
    wanted = [q for q in (qids if queries is None else queries) if q in row]
    out: dict[str, dict[str, float]] = {}
    for q in wanted:
        a, b = int(offsets[row[q]]), int(offsets[row[q] + 1])
        if k is not None:
            b = min(b, a + k)
        out[q] = dict(zip(docs[doc[a:b]].tolist(), score[a:b].tolist()))
    return out


def write_run(dataset: Dataset, system: str, variant: str | None = None, progress: ProgressFn = no_progress,
              loader=None) -> Path | None:  # noqa: ANN001
    """Compute and store one system's run (what the build calls); ``None`` for systems not stored."""
    spec = get_spec(system)
    if spec.not_stored:
        return None
    start = time.perf_counter()
    queries = stored_queries(dataset, system)
    rankings = _combined_from_stored(dataset, system, variant, progress) if spec.composite else None
    if rankings is None:
        rankings = compute_rankings(f"{system}@{variant}" if variant else system, dataset, queries, STORED_DEPTH,
                                    progress, loader)
    path = run_path(dataset.name, system, variant)
    trec.write_text(path, trec.ranked_text({q: zip(r.doc_ids, map(float, r.scores)) for q, r in rankings.items()},
                                           slug(_leaf(system, variant)), score_format=None))  # exact: ties kept
    write_npz(rankings, path)
    meta = {"system": system, "variant": variant, "fingerprint": fingerprint(dataset, system, variant),
            "depth": STORED_DEPTH, "queries": len(queries), "seconds": round(time.perf_counter() - start, 1),
            "ignore_identical_ids": dataset.ignore_identical_ids, "written": time.time()}
    tmp = path.with_suffix(f".json.tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, path.with_suffix(".json"))
    return path


def labels_digest(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """sha1 of a label set (``{qid: {doc: label}}``): which labels stored per-query metrics were computed on."""
    return hashlib.sha1(json.dumps(qrels, sort_keys=True).encode()).hexdigest()


def per_query_path(dataset_name: str, system: str, variant: str | None = None) -> Path:
    """``<run>.perquery.json`` beside a stored run: its per-query metrics on the default labels."""
    return run_path(dataset_name, system, variant).with_suffix(".perquery.json")


def stored_per_query(dataset: Dataset, name: str, qrels: Mapping[str, Mapping[str, int]], k: int,
                     labels_key: str | None = None) -> dict[str, dict[str, float]] | None:
    """The build's per-query metrics of system ``name`` (metric -> query -> value) when they were computed on exactly
    ``qrels`` (``labels_key``: its ``labels_digest`` if known) at depth ``k`` for the current model; else ``None``."""
    if k != STORED_DEPTH:
        return None
    parsed = _parse(name, dataset.name)
    if parsed.trained_on:
        return None
    path = per_query_path(dataset.name, parsed.system, parsed.variant)
    if not path.is_file() or run_status(dataset, parsed.system, parsed.variant) != "fresh":
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("fingerprint") != fingerprint(dataset, parsed.system, parsed.variant) or saved.get("depth") != k:
        return None
    if saved.get("labels") != (labels_key or labels_digest(qrels)):
        return None
    if saved.get("ties") != DEFAULT_TIES:  # computed under another tie rule (or before the rule was recorded)
        return None
    return saved.get("metrics")


def _combined_from_stored(dataset: Dataset, system: str, variant: str | None,
                          progress: ProgressFn) -> dict[str, Ranking] | None:
    """A composite system's run from its parts' fresh stored runs (a fusion: each part's top 100, self removed,
    exactly what ``FusionRetriever.search_many`` fuses), or ``None`` if a part has none."""
    module = system_module(system)
    if any(run_status(dataset, s, v) != "fresh" for s, v in module.parts(variant)):
        return None
    fused = module.fuse_stored(dataset, variant, lambda s, v: read_run_dict(run_path(dataset.name, s, v)),
                               STORED_DEPTH, progress)
    if fused is None:
        return None
    name = f"{system}@{variant}" if variant else system
    return {q: Ranking(name, [d for d, _ in r], [x for _, x in r]) for q, r in fused.items()}


# ----------------------------------------------------------------------------- reading
def read_run_dict(path: Path, queries: Sequence[str] | None = None, k: int | None = None) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` of a stored TREC file, only ``queries`` (all by default), top ``k``.

    Reads the ``.npz`` twin written with it when present (a 17k-query run in well under a second)."""
    import pandas as pd

    path = Path(path)
    twin = path.with_suffix(".npz")
    if twin.is_file() and twin.stat().st_mtime_ns >= path.stat().st_mtime_ns:
        return _read_npz(twin, queries, k)

    frame = pd.read_csv(path, sep=" ", header=None, names=["q", "x", "d", "rank", "score", "tag"],
                        usecols=["q", "d", "rank", "score"], dtype={"q": str, "d": str}, engine="c")
    if path.parent.parent.name == "stored-runs" and path.with_suffix(".json").is_file():  # a stored run: add its twin
        full: dict[str, Ranking] = {}
        for q, d, x in zip(frame["q"].tolist(), frame["d"].tolist(), frame["score"].tolist()):
            r = full.setdefault(q, Ranking("stored", [], []))
            r.doc_ids.append(d)
            r.scores.append(x)
        write_npz(full, path)
    if queries is not None:
        frame = frame[frame["q"].isin(set(queries))]
    if k is not None:
        frame = frame[frame["rank"] <= k]
    out: dict[str, dict[str, float]] = {}
    for q, d, s in zip(frame["q"].tolist(), frame["d"].tolist(), frame["score"].tolist()):
        out.setdefault(q, {})[d] = s
    return out


def stored_run(dataset: Dataset, system: str, variant: str | None = None, queries: Sequence[str] | None = None,
               k: int = STORED_DEPTH, name: str | None = None) -> Run | None:
    """The fresh stored run (restricted to ``queries``, top ``k``) or ``None`` if missing or stale."""
    if k > STORED_DEPTH or run_status(dataset, system, variant) != "fresh":
        return None
    data = read_run_dict(run_path(dataset.name, system, variant), queries, k)
    return _to_run(data, name or _leaf(system, variant))


def _to_run(data: Mapping[str, Mapping[str, float]], name: str) -> Run:
    run = Run.from_dict({q: dict(v) for q, v in data.items() if v}, name=name)
    run.name = name
    return run


class _Name:
    def __init__(self, system: str, variant: str | None, trained_on: str | None = None) -> None:
        self.system, self.variant, self.trained_on = system, variant, trained_on


def _parse(name: str, dataset_name: str = "") -> _Name:
    """``SYSTEM``, ``SYSTEM@VARIANT`` or ``SYSTEM[@VARIANT]@TRAINED_ON`` (a model applied zero-shot,
    ``core.transfer``: never stored, always computed); unknown names raise with the known ones."""
    from core.registry import parse_name

    parsed = parse_name(name)
    trained_on = parsed.trained_on if parsed.trained_on != dataset_name else None
    return _Name(parsed.system, parsed.variant, trained_on)


def load_runs(dataset: Dataset, names: Sequence[str], queries: Mapping[str, str], k: int = STORED_DEPTH,
              progress: ProgressFn = no_progress, loader: Loader | None = None,
              query_form: str = "tokenized") -> list[Run]:
    """``load_run_dicts`` as ranx ``Run``s named as in ``names``."""
    return [_to_run(data, name) for name, data in
            zip(names, load_run_dicts(dataset, names, queries, k, progress, loader, query_form))]


def load_run_dicts(dataset: Dataset, names: Sequence[str], queries: Mapping[str, str], k: int = STORED_DEPTH,
                   progress: ProgressFn = no_progress, loader: Loader | None = None,
                   query_form: str = "tokenized") -> list[dict[str, dict[str, float]]]:
    """Runs of systems by name (``SYSTEM`` or ``SYSTEM@VARIANT``) over ``queries``: stored where fresh,
    computed (with ``progress`` reporting query counts) for the queries a stored run lacks.

    ``loader(name, variant, options)`` loads a system (default: the one loader, ``core.serving.loader``;
    the page passes its cached loader). Runs come back named exactly as in ``names``.
    ``query_form="typed"`` ranks the queries as people type them (their display form): never stored, computed.
    """
    typed = query_form != "tokenized" and dataset.tokenized
    queries = dataset.in_form(queries, query_form)
    out = []
    wanted = list(queries)
    for i, name in enumerate(names):
        parsed = _parse(name, dataset.name)
        report = (lambda f, m, i=i: progress((i + max(0.0, min(1.0, f))) / len(names), m))
        report(0.0, f"{name}: reading the stored run")
        data: dict[str, dict[str, float]] = {}
        if (not typed and not parsed.trained_on and k <= STORED_DEPTH
                and run_status(dataset, parsed.system, parsed.variant) == "fresh"):
            data = read_run_dict(run_path(dataset.name, parsed.system, parsed.variant), wanted, k)
            covered = set(stored_queries(dataset, parsed.system))
            missing = [q for q in wanted if q not in covered]
        else:
            missing = wanted
        if missing:
            report(0.0, f"{name}: computing 0/{len(missing):,} queries")
            rankings = compute_rankings(name, dataset, {q: queries[q] for q in missing}, k, report, loader)
            data.update({q: r.as_dict() for q, r in rankings.items()})
        report(1.0, f"{name}: {len(wanted):,}/{len(wanted):,} queries")
        out.append(data)
    return out
