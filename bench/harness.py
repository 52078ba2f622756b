"""Benchmark sections for ``python -m bench`` (not tests): each returns a JSON-able dict.

Every timing is warm (warm-up calls first, faiss ``RepeatTimer`` style) and reported as p50/p95 over
repeats. Numbers depend on the machine and on its load: the machine section records cores, RAM, CPU
model, torch threads and the load average at the start and the end of the run.

QQP protocol: every query is also in the collection; each query is removed from its own ranking
(``exclude=[qid]`` / ``ignore_identical_ids``) everywhere below.
"""
from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

DATASET = "qqp-bimpm"


# ----------------------------------------------------------------------------- plumbing
@dataclass(frozen=True)
class Settings:
    quick: bool = False
    dataset: str = DATASET
    seed: int = 13

    def pick(self, quick, full):
        return quick if self.quick else full


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in seconds)
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "mean_ms": round(statistics.fmean(ms), 3)}


def timed(fn: Callable[[], object], repeats: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (``getrusage``; Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def current_rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def sample_queries(ds, n: int, seed: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    qids = sorted(ds.queries)
    pick = rng.choice(len(qids), size=min(n, len(qids)), replace=False)
    return [(qids[i], ds.queries[qids[i]]) for i in pick]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return float("nan")


def machine() -> dict:
    import torch

    import bm25s
    import faiss
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_gb": _ram_gb(),
        "torch_threads": torch.get_num_threads(),
        "cuda": bool(torch.cuda.is_available()),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "versions": {"torch": torch.__version__, "bm25s": bm25s.__version__, "faiss": faiss.__version__,
                     "numpy": np.__version__},
        "platform": platform.platform(),
    }


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


# ----------------------------------------------------------------------------- BM25 at scale
def synthetic_collection(ds, n: int, seed: int) -> dict[str, str]:
    """SYNTHETIC questions: lengths and words drawn from the QQP collection's length and unigram distributions."""
    from collections import Counter

    from core.data.pipeline import terms

    tokens = [terms(t) for t in ds.corpus.values()]
    lengths = np.array([max(1, len(t)) for t in tokens])
    counts = Counter(w for t in tokens for w in t)
    vocab = np.array(list(counts))
    p = np.array([counts[w] for w in vocab], dtype=np.float64)
    p /= p.sum()
    rng = np.random.default_rng(seed)
    lens = rng.choice(lengths, size=n)
    words = vocab[rng.choice(len(vocab), size=int(lens.sum()), p=p)]
    out, pos = {}, 0
    for i, m in enumerate(lens):
        out[f"syn{i:07d}"] = " ".join(words[pos:pos + m])
        pos += m
    return out


def _rank_bm25(corpus_tokens: list[list[str]], k1: float, b: float):
    """rank-bm25 with Lucene's idf (the oracle of tests/test_bm25.py): same scores as bm25s."""
    import math

    from rank_bm25 import BM25Okapi

    class LuceneBM25(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

    return LuceneBM25(corpus_tokens, k1=k1, b=b)


def bm25_one_size(label: str, corpus: dict[str, str], queries: list[str], rank_queries: int, synthetic: bool) -> dict:
    from core.retrieval.bm25 import BM25Config, BM25Retriever
    from core.data.pipeline import terms

    cfg = BM25Config()
    t0 = time.perf_counter()
    retriever = BM25Retriever.index(corpus, cfg)
    index_s = time.perf_counter() - t0
    retriever.retrieve(queries[:64], 10)  # warm-up (numba JIT)
    retriever.retrieve(queries[:1], 10)
    t0 = time.perf_counter()
    retriever.retrieve(queries, 10)
    batched = time.perf_counter() - t0
    single = [timed(lambda q=q: retriever.retrieve([q], 10), 1, 0)[0] for q in queries[: min(100, len(queries))]]
    row = {"collection": label, "documents": len(corpus), "synthetic": synthetic,
           "bm25s_index_s": round(index_s, 2), "bm25s_batched_qps": round(len(queries) / batched, 1),
           "bm25s_single": percentiles(single), "batch_queries": len(queries)}
    # rank-bm25: full index, small query sample, per-query time extrapolated to qps
    t0 = time.perf_counter()
    oracle = _rank_bm25([terms(t) for t in corpus.values()], cfg.k1, cfg.b)
    row["rank_bm25_index_s"] = round(time.perf_counter() - t0, 2)
    sample = queries[:rank_queries]
    secs = []
    for q in sample:
        toks = terms(q)
        t0 = time.perf_counter()
        scores = oracle.get_scores(toks)
        np.argpartition(-scores, 10)[:10]
        secs.append(time.perf_counter() - t0)
    per_query = statistics.fmean(secs)
    row.update({"rank_bm25_queries": len(sample), "rank_bm25_ms_per_query": round(1000 * per_query, 2),
                "rank_bm25_qps_extrapolated": round(1 / per_query, 2),
                "speedup_batched_vs_rank_bm25": round(per_query * len(queries) / batched, 1),
                "speedup_single_vs_rank_bm25": round(per_query / max(1e-9, statistics.median(single)), 1)})
    del oracle
    row["peak_rss_mb"] = peak_rss_mb()
    return row


def section_bm25(s: Settings, ds) -> dict:
    queries = [t for _, t in sample_queries(ds, s.pick(500, 2000), s.seed + 2)]
    sizes = s.pick([100_000], [100_000, 500_000, 1_000_000])
    rows = []
    bar = tqdm(total=1 + len(sizes), desc="bm25", unit="collection")
    rows.append(bm25_one_size(f"QQP ({len(ds.corpus):,} questions)", ds.corpus, queries, s.pick(20, 100), False))
    bar.update()
    for n in sizes:
        corpus = synthetic_collection(ds, n, s.seed)
        rows.append(bm25_one_size(f"synthetic {n:,}", corpus, queries, s.pick(5, 20) if n >= 500_000 else
                                  s.pick(10, 50), True))
        del corpus
        bar.update()
    bar.close()
    at_500k = next((r for r in rows if r["documents"] == 500_000), None)
    return {"rows": rows, "queries": "real QQP queries (sampled); k=10; bm25s batched = one retrieve() call "
                                      "over all queries (numba, 2 threads); single = one query per call",
            "goal": "≥ 300 queries/s at 500k and ≥ 200× rank-bm25",
            "meets_goal_500k": None if at_500k is None else bool(at_500k["bm25s_batched_qps"] >= 300
                                                                 and at_500k["speedup_batched_vs_rank_bm25"] >= 200),
            "note": "synthetic collections: QQP vocabulary and length distribution (unigram sampling), labelled "
                    "synthetic; rank-bm25 scored on a small query sample and extrapolated per query"}


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
        return {"skipped": "minilm is not built (python -m core train --system minilm)"}
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


# ----------------------------------------------------------------------------- cold start
def section_coldstart(s: Settings, ds) -> dict:  # noqa: ARG001
    """Seconds from `streamlit run` to the Compare page showing BM25's ranking in headless Chromium."""
    import shutil
    import tempfile
    import urllib.parse
    from pathlib import Path

    from core.paths import var_dir
    from tests.e2e.conftest import CHROME_FLAGS, browser_binaries, free_port, stop

    chrome, driver_path = browser_binaries()
    if not (chrome and driver_path):
        return {"skipped": "chromium/chromedriver not installed"}
    from core.registry import system_module
    if not system_module("bm25").is_built(ds):
        return {"skipped": "bm25 is not built"}
    import subprocess
    import sys

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from core.paths import REPO_ROOT

    profile = Path(tempfile.mkdtemp(prefix="qrs-bench-chrome-"))
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))  # browser start not timed
    port = free_port()
    env = {**os.environ, "QRS_VAR": str(var_dir()), "QRS_AUTOBUILD": "0", "QRS_DATASET": ds.name}
    log = open(Path(tempfile.gettempdir()) / f"qrs-bench-streamlit-{port}.log", "wb")
    query = "How can I improve my English speaking skills ?"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.fileWatcherType", "none"], cwd=REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    marks = {}
    try:
        import urllib.request
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:  # noqa: S310
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.perf_counter() - t0 > 120:
                raise RuntimeError("streamlit did not start")
            time.sleep(0.1)
        marks["server_healthy_s"] = round(time.perf_counter() - t0, 2)
        driver.get(f"http://127.0.0.1:{port}/Compare?q={urllib.parse.quote(query)}")
        WebDriverWait(driver, 180, poll_frequency=0.1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] [data-testid^="glide-cell-"]'))
        marks["compare_result_s"] = round(time.perf_counter() - t0, 2)
        # a second query in the same (now warm) session
        t1 = time.perf_counter()
        driver.get(f"http://127.0.0.1:{port}/Compare?q={urllib.parse.quote('What is the best way to learn Python ?')}")
        WebDriverWait(driver, 120, poll_frequency=0.1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] [data-testid^="glide-cell-"]'))
        marks["warm_page_load_s"] = round(time.perf_counter() - t1, 2)
    finally:
        stop(proc)
        driver.quit()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
    return {**marks, "goal_s": 10, "meets_goal": marks.get("compare_result_s", 1e9) <= 10,
            "what": "process start → /_stcore/health ok → Compare page (?q=…, BM25 default) shows its table",
            "artifacts": str(var_dir())}


# ----------------------------------------------------------------------------- today's code vs this code
AB_CHOICES = [
    {"name": "bm25"},
    {"name": "minilm"},
    {"name": "tree-bert", "options": [["beam", 20], ["K", 8]]},
    {"name": "densetrans", "options": [["index", "ivfpq"], ["nprobe", 10]]},
    {"name": "sdml-cnn", "options": [["index", "ivfpq"], ["nprobe", 10]]},
    {"name": "frm", "first_stage": "bm25", "depth": 20},
]


def _child(root: str, task: str, args: dict, timeout: int = 1800, env: dict | None = None) -> dict:
    """Run ``bench/ab_child.py`` of this checkout against the code tree ``root`` in a fresh process."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent / "ab_child.py"
    env = {**os.environ, "PYTHONPATH": root, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    proc = subprocess.run([sys.executable, str(script), root, task, json.dumps(args)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr or proc.stdout)[-600:]}


def _built_choices(ds) -> list[dict]:
    built, _ = built_systems(ds)
    return [c for c in AB_CHOICES if c["name"] in built and c.get("first_stage", "bm25") in built]


def _commit(root: str) -> str:
    """The short commit a code tree is at (reports name commits, not this machine's paths)."""
    import subprocess

    out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "a tree outside git"


def section_ab(s: Settings, ds, baseline: str, baseline_var: str | None = None) -> dict:
    """Today's code (a git worktree at ``baseline``) against this checkout, in one run on the same machine.

    The Compare query runs with each tree's own page defaults (``CompareState().choices()``: today's ivfpq
    nprobe 10 and tree K 8 against the systems' serving defaults, exact). Each measurement runs in a fresh
    process per tree, the two trees alternating (base, new, base,
    new, ...) so that a change of the machine's load hits both sides alike; the ratio is of the
    medians over rounds. Same sampled queries/questions, same choices (the Compare page with the five
    first stages and FRM on BM25's top 20; each query removed from its own ranking). Same artifacts
    folder, or with ``baseline_var`` the base tree reads the artifacts its own build wrote there (needed
    where the newer build's checkpoints are not readable by the older code, FRM's for one).
    """
    from pathlib import Path

    from core.paths import REPO_ROOT

    new_root, base_root = str(REPO_ROOT), str(Path(baseline).resolve())
    rounds = s.pick(1, 3)
    choices = _built_choices(ds)
    env_of = {"base": {"QRS_VAR": str(Path(baseline_var).resolve())} if baseline_var else {}, "new": {}}
    out: dict = {"baseline_tree": _commit(base_root), "current_tree": _commit(new_root), "rounds": rounds,
                 "baseline_artifacts": "the base tree's own build" if baseline_var else "shared",
                 "compare": {"choices": [c["name"] for c in choices], "base": [], "new": []},
                 "encode": {"base": [], "new": [], "new_int8": []}}
    for r in range(rounds):
        for side, root in (("base", base_root), ("new", new_root)):
            res = _child(root, "encode", {"dataset": ds.name, "n": s.pick(512, 3000), "seed": 20 + r}, env=env_of[side])
            out["encode"][side].append(res)
            print(f"[bench] ab encode round {r + 1} {side}: {res.get('questions_per_s', res.get('error'))}", flush=True)
        res = _child(new_root, "encode", {"dataset": ds.name, "n": s.pick(512, 3000), "seed": 20 + r},
                     env={"QRS_MINILM_BACKEND": "onnx-int8"})  # the opt-in quantized backend
        out["encode"]["new_int8"].append(res)
        for side, root in (("base", base_root), ("new", new_root)):
            res = _child(root, "compare", {"dataset": ds.name, "n": s.pick(10, 40), "seed": 30 + r,
                                           "choices": choices, "page_defaults": True}, env=env_of[side])
            if "seconds" in res:
                res = {**percentiles(res.pop("seconds")), **res}
            out["compare"][side].append(res)
            print(f"[bench] ab compare round {r + 1} {side}: {res.get('p50_ms', res.get('error'))}", flush=True)

    def median(rows, key):
        vals = [row[key] for row in rows if key in row]
        return round(float(np.median(vals)), 2) if vals else None

    enc_base, enc_new = median(out["encode"]["base"], "questions_per_s"), median(out["encode"]["new"], "questions_per_s")
    cmp_base, cmp_new = median(out["compare"]["base"], "p50_ms"), median(out["compare"]["new"], "p50_ms")
    out["summary"] = {
        "encode_qps_base": enc_base, "encode_qps_new": enc_new,
        "encode_speedup": round(enc_new / enc_base, 2) if enc_base and enc_new else None,
        "encode_qps_new_int8": median(out["encode"]["new_int8"], "questions_per_s"),
        "compare_p50_ms_base": cmp_base, "compare_p50_ms_new": cmp_new,
        "compare_speedup": round(cmp_base / cmp_new, 2) if cmp_base and cmp_new else None,
        "goals": {"encode_speedup": 2.0, "compare_speedup": 1.7},
    }
    return out


def section_first_view(s: Settings, ds) -> dict:  # noqa: ARG001
    """Error Analysis's default first view from a fresh process (imports, data, stored runs, ranx analysis)."""
    from core.analysis.runs import run_status
    from core.judging.pooling import available_systems

    available = available_systems(ds)
    fresh = [n for n in available if "@" not in n and run_status(ds, n) == "fresh"]
    names = (fresh or available)[:3]  # the first three systems with a stored run (bm25, minilm, tree-bert)
    root = str(__import__("core.paths", fromlist=["REPO_ROOT"]).REPO_ROOT)
    res = _child(root, "first_view", {"dataset": ds.name, "systems": names})
    # on a started server: imports, the dataset and ranx's numba warm-up (app.py, background) are done
    warm = _child(root, "first_view", {"dataset": ds.name, "systems": names, "warm": True})
    return {**res, "goal_s": 10, "meets_goal": bool(res.get("total_s", 1e9) <= 10),
            "started_server": {k: warm.get(k) for k in ("warm_up_s", "runs_s", "view_s", "error") if k in warm},
            "started_server_meets_goal": bool((warm.get("view_s") or 1e9) <= 10),
            "what": "fresh process: import core, load the dataset, labels of the default split, the default "
                    "systems' stored runs (core.analysis.runs.load_runs), core.analysis.error_analysis.analyze with the default "
                    "metrics; the page's drawing is not included"}
