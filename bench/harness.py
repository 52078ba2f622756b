"""The speed harness's in-process sections (``python -m bench harness``; not tests): warm latency per system, the
Compare page's whole query, MiniLM encoding, build times and ANN recall at matched budgets; each returns a
JSON-able dict. BM25 at scale: ``bench.harness_bm25``; the sections run in fresh processes (cold start, A/B, first
view): ``bench.harness_fresh``; how a time is taken: ``bench.measure``.

Every timing is warm (warm-up calls first, faiss ``RepeatTimer`` style) and reported as p50/p95 over
repeats. Numbers depend on the machine and on its load: the machine section records cores, RAM, CPU
model, torch threads and the load average at the start and the end of the run.

QQP protocol: every query is also in the collection; each query is removed from its own ranking
(``exclude=[qid]`` / ``ignore_identical_ids``) everywhere below.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from bench.measure import percentiles

__all__ = ["DATASET", "Loader", "Settings", "built_systems", "sample_queries", "section_ann", "section_builds",
           "section_compare", "section_encode", "section_latency"]

DATASET = "qqp-bimpm"


# ----------------------------------------------------------------------------- plumbing
@dataclass(frozen=True)
class Settings:
    quick: bool = False
    dataset: str = DATASET
    seed: int = 13

    def pick(self, quick, full):
        return quick if self.quick else full


def sample_queries(ds, n: int, seed: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    qids = sorted(ds.queries)
    pick = rng.choice(len(qids), size=min(n, len(qids)), replace=False)
    return [(qids[i], ds.queries[qids[i]]) for i in pick]


# ----------------------------------------------------------------------------- systems
def built_systems(ds) -> tuple[list[str], dict[str, str]]:
    """Registry systems built in the artifacts folder; the others with the reason they are skipped."""
    from core.registry import list_systems, supports, system_module

    built, skipped = [], {}
    for spec in list_systems():
        if not supports(spec, ds):
            skipped[spec.name] = "does not apply to this dataset"
            continue
        try:
            ok = system_module(spec.name).is_built(ds)
        except ModuleNotFoundError:
            skipped[spec.name] = "not implemented"
            continue
        if ok:
            built.append(spec.name)
        else:
            skipped[spec.name] = f"not built (python -m core train --system {spec.name} --dataset {ds.name})"
    return built, skipped


class Loader:
    """Loaded systems, once each (what ``ui.cache.system`` does for the app)."""

    def __init__(self, ds) -> None:
        self.ds, self.cache, self.load_seconds = ds, {}, {}

    def __call__(self, name: str, variant=None, options: tuple = ()):
        from core.serving.loader import load as load_system

        key = (name, variant, tuple(options))
        if key not in self.cache:
            t0 = time.perf_counter()
            self.cache[key] = load_system(name, self.ds, variant=variant, **dict(options))
            self.load_seconds[f"{name}{'@' + variant if variant else ''}{dict(options) or ''}"] = round(
                time.perf_counter() - t0, 2)
        return self.cache[key]


def section_latency(s: Settings, ds, load: Loader) -> dict:
    """Warm single-query latency of every built system (rerankers: BM25 top-20 reranked)."""
    from core.registry import get_spec

    built, skipped = built_systems(ds)
    queries = sample_queries(ds, s.pick(10, 200), s.seed)
    out = {"queries": len(queries), "k": 10, "systems": {}, "skipped": skipped,
           "note": "warm: 3 warm-up queries first; one query at a time, as the Compare page runs them"}
    for name in tqdm(built, desc="latency", unit="system"):
        spec = get_spec(name)
        n = len(queries) if spec.kind == "retriever" else min(len(queries), s.pick(5, 50))
        if name == "tree-bert-cross":  # slow by nature (a budget of cross-encoder pair scorings per query)
            n = s.pick(2, 10)
        try:
            system = load(name)
            if spec.kind == "retriever":
                def one(q, system=system):
                    return system.search(q[1], 10, exclude=[q[0]])
            else:
                bm25 = load("bm25")

                def one(q, system=system, bm25=bm25):
                    first = bm25.search(q[1], 20, exclude=[q[0]])
                    return system.rerank(q[1], first, ds.corpus, k=10)
            for q in queries[: 1 if name == "tree-bert-cross" else 3]:
                one(q)
            secs = []
            for q in queries[:n]:
                t0 = time.perf_counter()
                one(q)
                secs.append(time.perf_counter() - t0)
            out["systems"][name] = {**percentiles(secs), "kind": spec.kind,
                                    **({"what": "BM25 top-20 + rerank"} if spec.kind == "reranker" else {})}
        except Exception as exc:  # a broken artifact is a finding, not a crash of the bench
            out["systems"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    out["load_seconds"] = dict(load.load_seconds)
    return out


def section_compare(s: Settings, ds, load: Loader) -> dict:
    """The Compare page's whole query: every built first-stage system + FRM on BM25's top-20."""
    from core.analysis.compare import SystemChoice, compare
    from core.registry import get_spec

    built, _ = built_systems(ds)
    first = [n for n in built if get_spec(n).kind == "retriever" and n != "tree-bert-cross"]
    choices = []
    for name in first:
        opts = (("index", "ivfpq"), ("nprobe", 10)) if name in ("densetrans", "sdml-cnn") else ()
        if name == "tree-bert":
            opts = (("beam", 20), ("K", 8))
        choices.append(SystemChoice(name, options=opts))
    if "frm" in built:
        choices.append(SystemChoice("frm", first_stage="bm25", depth=20))
    queries = sample_queries(ds, s.pick(8, 100), s.seed + 1)
    for qid, text in queries[:2]:  # warm-up (loads every system)
        compare(ds, text, choices, load, k=10, query_id=qid)
    secs, per_system = [], {c.label: [] for c in choices}
    errors = {}
    for qid, text in tqdm(queries, desc="compare", unit="query"):
        t0 = time.perf_counter()
        res = compare(ds, text, choices, load, k=10, query_id=qid)
        secs.append(time.perf_counter() - t0)
        for r in res.results:
            if r.ok:
                per_system[r.choice.label].append(r.ranking.seconds)
            else:
                errors[r.choice.label] = r.error[:200]
    stats = percentiles(secs)
    return {"choices": [c.label for c in choices], "frm_included": "frm" in built, **stats,
            "goal_p50_ms": 150, "meets_goal": bool(stats.get("p50_ms", 1e9) <= 150),
            "per_system": {k: percentiles(v) for k, v in per_system.items()}, "errors": errors,
            "excluded": {"tree-bert-cross": "slow by nature (seconds per query, see the latency table)"}
            if "tree-bert-cross" in built else {},
            "note": "core.analysis.compare.compare as the page calls it (includes exact-search recall checks for ANN/tree "
                    "choices); tree-bert-cross is left out of the page figure (its own latency is in the table above)"}


# ----------------------------------------------------------------------------- MiniLM, builds, ANN
def section_encode(s: Settings, ds) -> dict:
    import torch

    try:
        from core.retrieval import bert
    except ModuleNotFoundError:
        return {"skipped": "core.retrieval.bert not available"}
    encoder = bert.load_encoder(ds, "mean")
    texts = list(ds.corpus.values())[: s.pick(256, 4096)]
    encoder.encode(texts[:64])
    t0 = time.perf_counter()
    encoder.encode(texts, batch_size=128)
    secs = time.perf_counter() - t0
    return {"questions": len(texts), "questions_per_s": round(len(texts) / secs, 1), "seconds": round(secs, 2),
            "torch_threads": torch.get_num_threads(), "batch_size": 128, "max_length": 64,
            "note": "all-MiniLM-L6-v2, mean pooling, inference_mode, length-sorted batches, CPU"}


def section_builds(s: Settings, ds) -> dict:  # noqa: ARG001
    """Build times recorded by the default build (status files) and by each system's metrics.json."""
    import json

    from core.build import read_status
    from core.registry import get_spec, system_dir

    built, skipped = built_systems(ds)
    out = {}
    for name in built:
        status = read_status(ds, get_spec(name))
        metrics = {}
        path = system_dir(ds.name, name) / "metrics.json"
        if path.is_file():
            try:
                metrics = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                metrics = {}
        recorded = {k: round(float(v), 1) for k, v in metrics.items()
                    if isinstance(v, (int, float)) and k.endswith("seconds")}
        out[name] = {"build_status_seconds": round(status.seconds, 1) if status.seconds else None, **recorded,
                     "profile": metrics.get("profile", status.metrics.get("profile"))}
    return {"systems": out, "skipped": skipped,
            "note": "seconds as recorded when each system was built (under whatever load the machine had then)"}


def section_ann(s: Settings, ds, load: Loader) -> dict:
    """Exact vs faiss (IVF, IVFPQ, HNSW) vs k-means tree on the MiniLM vectors at matched budgets."""
    import faiss

    from core.retrieval.indexing import IndexSpec, build_index, distance_counter, set_search_params

    built, _ = built_systems(ds)
    if "minilm" not in built:
        return {"skipped": "minilm is not built (python -m core build --systems minilm)"}
    minilm = load("minilm")
    vectors = np.ascontiguousarray(minilm.doc_vectors, dtype=np.float32)
    ids = [str(d) for d in minilm.doc_ids]
    position = {d: i for i, d in enumerate(ids)}
    queries = [q for q, _ in sample_queries(ds, s.pick(200, 1000), s.seed + 3) if q in position]
    qv = vectors[[position[q] for q in queries]]
    k = 10
    n = len(vectors)
    # exact: brute force inner product (what minilm's Flat index does)
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    t0 = time.perf_counter()
    _, exact = flat.search(qv, k + 1)
    exact_s = (time.perf_counter() - t0) / len(queries)
    truth = [set([j for j in row if j != position[q]][:k]) for row, q in zip(exact, queries)]

    def recall(rows) -> float:
        return float(np.mean([len(set([j for j in row if j != position[q]][:k]) & t) / k
                              for row, t, q in zip(rows, truth, queries)]))

    points = [{"method": "exact (Flat)", "param": "-", "distance_computations": n, "recall@10": 1.0,
               "ms_per_query": round(1000 * exact_s, 3)}]
    for preset, params in (("ivf", [1, 2, 4, 8, 16, 32]), ("ivfpq", [1, 4, 10, 32]), ("hnsw", [16, 32, 64, 128])):
        spec = IndexSpec.from_preset(preset, n, vectors.shape[1])
        t0 = time.perf_counter()
        index = build_index(vectors, spec)
        build_s = time.perf_counter() - t0
        reset, read = distance_counter(index)
        for value in params:
            set_search_params(index, f"{'efSearch' if preset == 'hnsw' else 'nprobe'}={value}")
            index.search(qv[:10], k + 1)
            reset()
            t0 = time.perf_counter()
            _, rows = index.search(qv, k + 1)
            secs = (time.perf_counter() - t0) / len(queries)
            points.append({"method": f"faiss {spec.factory}", "param": f"{'efSearch' if preset == 'hnsw' else 'nprobe'}={value}",
                           "distance_computations": round(read(len(queries))), "recall@10": round(recall(rows), 4),
                           "ms_per_query": round(1000 * secs, 3), "build_s": round(build_s, 2)})
    if "tree-bert" in built:
        tree = load("tree-bert")
        for beam in (2, 5, 10, 20, 50, 100):
            tree.set_params(beam=beam)
            tree.retrieve_vectors(qv[:10], k + 1)
            t0 = time.perf_counter()
            hits = tree.retrieve_vectors(qv, k + 1)
            secs = (time.perf_counter() - t0) / len(queries)
            rows = [[position[d] for d in row] for row in hits.ids]
            dist = np.mean([st.get("distance_computations", np.nan) for st in (hits.stats or [{}])])
            points.append({"method": "k-means tree (tree-bert)", "param": f"beam={beam}",
                           "distance_computations": round(float(dist)), "recall@10": round(recall(rows), 4),
                           "ms_per_query": round(1000 * secs, 3)})
    budgets = [round(n * f) for f in (0.01, 0.02, 0.05, 0.1, 0.2)]
    at_budget = []
    for budget in budgets:
        row = {"budget_distance_computations": budget}
        for method in sorted({p["method"] for p in points if p["method"] != "exact (Flat)"}):
            fits = [p for p in points if p["method"] == method and p["distance_computations"] <= budget]
            best = max(fits, key=lambda p: p["recall@10"], default=None)
            row[method] = None if best is None else {"recall@10": best["recall@10"], "param": best["param"],
                                                     "ms_per_query": best["ms_per_query"]}
        at_budget.append(row)
    return {"vectors": n, "dim": int(vectors.shape[1]), "queries": len(queries), "points": points,
            "at_equal_budget": at_budget,
            "note": "MiniLM mean vectors of the collection; queries are dataset questions (their own vector), self "
                    "removed; recall@10 against exact search; budget = distance computations per query (faiss "
                    "IVF/HNSW stats, tree counter); batched search of all sampled queries"}
