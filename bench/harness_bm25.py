"""The harness's BM25-at-scale section: bm25s against rank-bm25 (Lucene idf) on QQP and on synthetic
collections of 100k–1M questions drawn from QQP's vocabulary and length distribution."""
from __future__ import annotations

import statistics
import time

import numpy as np
from tqdm import tqdm

from bench.harness import Settings, sample_queries
from bench.measure import peak_rss_mb, percentiles, timed

__all__ = ["bm25_one_size", "section_bm25", "synthetic_collection"]


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
