"""Measure tree-search BERT on the paper's QQP protocol (tree-search-bert-guo.md §4, Tables 1, 2, 4).

Protocol: collection = 36,737 QQP dev+test questions, queries = the 17,269 questions of positive pairs
(or the 1,781 held-out test-split queries with ``--split test``), top-20, each query removed from its
own ranking (ignore_identical_ids). Metrics (ranx via core.evaluation): MAP@20, P@1, MRR@20, NDCG@20,
MRR@10. Latency = wall time per query of batched search, one thread (faiss + numpy + torch), measured
on a shared machine. all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates.

Usage (QRS_VAR=var, from the repository root):
  .venv/bin/python -m bench.tree_eval poolings            # compute-all for cls/mean/max (+ encodes cls/max once)
  .venv/bin/python -m bench.tree_eval trees               # paper trees K = 5/8/10, beam = N = 20
  .venv/bin/python -m bench.tree_eval curve               # MAP vs distance computations: trees, IVF, HNSW
  .venv/bin/python -m bench.tree_eval cross [n_queries] [budget ...]  # interaction-based tree on a sample of test queries
  .venv/bin/python -m bench.tree_eval pairauc [n_pairs]   # cross-encoder vs zero-shot cosine ROC AUC, test pairs (0 = all)
  .venv/bin/python -m bench.tree_eval finetuned           # fine-tuned vs pretrained on the test queries
Each line printed is JSON; ``--split test`` restricts queries to the held-out test split,
``--split=paper-004`` to the paper's §4.1 queries (the first question of each positive pair, 9,027 distinct).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


import faiss  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.data.datasets import load_dataset  # noqa: E402
from core.evaluation import evaluate_run  # noqa: E402
from core.retrieval.indexing import IndexSpec, build_index, distance_counter, set_search_params  # noqa: E402
from core.retrieval.base import Hits, Retriever  # noqa: E402

METRICS = ["map@20", "precision@1", "mrr@20", "ndcg@20", "mrr@10"]
OUT = Path(__file__).resolve().parent / "reports" / "tree_bert_results.jsonl"


def emit(row: dict) -> None:
    line = json.dumps(row, default=float)
    print(line, flush=True)
    with OUT.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def evaluate(retriever: Retriever, dataset, queries: dict[str, str], qrels, label: str, extra: dict | None = None) -> dict:
    t0 = time.perf_counter()
    run = retriever.search_many(queries, k=20, ignore_identical_ids=True)
    seconds = time.perf_counter() - t0
    scores = evaluate_run(qrels, run, METRICS)
    stats = [r.stats for r in run.values()]
    row = {"system": label, "queries": len(queries), **{m: round(v, 4) for m, v in scores.items()},
           "ms_per_query": round(1000 * seconds / len(queries), 3)}
    for key in ("distance_computations", "pair_scorings"):
        vals = [s[key] for s in stats if key in s]
        if vals:
            row[key] = round(float(np.mean(vals)), 1)
            row[key + "_p10_p90"] = [float(np.percentile(vals, 10)), float(np.percentile(vals, 90))]
    row.update(extra or {})
    emit(row)
    return row


class VectorFaiss(Retriever):
    """faiss index over given vectors; queries are collection texts (stored vectors reused)."""

    def __init__(self, name, index, doc_ids, vectors, texts):
        self.name, self.index, self.doc_ids, self.vectors = name, index, np.asarray(doc_ids), vectors
        self.row = {t: i for i, t in enumerate(texts)}
        self.reset, self.read = distance_counter(index)
        self.batch_size = 1024

    def retrieve(self, texts, k):
        q = self.vectors[[self.row[t] for t in texts]]
        self.reset()
        scores, rows = self.index.search(q, k)
        per = self.read(len(texts))
        ivf = faiss.try_extract_index_ivf(self.index)
        if ivf is not None:
            per += ivf.nlist  # the coarse quantizer compares the query with every list centroid
        return Hits([self.doc_ids[r[r >= 0]].tolist() for r in rows],
                    [s[r >= 0].astype(float).tolist() for r, s in zip(rows, scores)],
                    [{"distance_computations": per}] * len(texts))


def setup(split: str):
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    dataset = load_dataset("qqp-bimpm")
    queries = dataset.split_queries(split)
    qrels = dataset.split_qrels(split)
    return dataset, queries, qrels


class Precomputed:
    """Encoder protocol over vectors already computed (fills the shared embedding cache)."""

    def __init__(self, encoder_id: str, vectors: np.ndarray) -> None:
        self.encoder_id, self.vectors = encoder_id, vectors

    def encode(self, texts, batch_size=128, progress=None):
        return self.vectors


def poolings(split: str) -> None:
    from core.retrieval import bert
    from core.retrieval.dense import cached_embeddings

    dataset, queries, qrels = setup(split)
    texts = list(dataset.corpus.values())
    need = [p for p in ("cls", "max", "mean") if not _cached(dataset, p)]
    if need:  # one forward pass gives every pooling (the hidden states are the same)
        enc = bert.MiniLMEncoder.pretrained("mean")
        t0 = time.perf_counter()
        out = {p: np.empty((len(texts), 384), np.float32) for p in need}
        from models.bert import pool

        with torch.inference_mode():
            for i, (idx, ids, mask) in enumerate(enc._batches(texts, 128)):
                hidden = enc.model.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
                for p in need:
                    out[p][idx] = pool(hidden, mask, p).numpy()
                if i % 40 == 0:
                    print(f"  encoded {i * 128}/{len(texts)}", flush=True)
        emit({"what": "encode all poolings in one pass (1 thread, shared load)", "texts": len(texts),
              "seconds": round(time.perf_counter() - t0, 1), "poolings": need})
        for p in need:
            fake = Precomputed(f"{bert.PRETRAINED_ID}|{p}|len64", out[p])
            cached_embeddings(fake, dataset.corpus)
    for p in ("cls", "mean", "max"):
        if not bert.is_built(dataset, p):
            bert.build(dataset, variant=p)
        retriever = bert.load(dataset, p)
        faiss.omp_set_num_threads(1)
        evaluate(retriever, dataset, queries, qrels, f"compute-all cosine ({p})", {"split": split})


def _cached(dataset, pooling: str) -> bool:
    import hashlib

    from core.paths import artifact_dir
    from core.retrieval import bert
    from core.retrieval.dense import corpus_fingerprint

    key = hashlib.sha1(f"{bert.PRETRAINED_ID}|{pooling}|len64|{corpus_fingerprint(dataset.corpus)}".encode()).hexdigest()[:20]
    return (artifact_dir("cache", "embeddings") / f"{key}.npy").is_file()


def _vectors(dataset):
    from core.retrieval import bert

    return bert.collection_embeddings(dataset, "mean")


def trees(split: str) -> None:
    from core.retrieval.tree import TreeRetriever
    from core.retrieval.tree_search import KMeansTree, TreeConfig

    dataset, queries, qrels = setup(split)
    vectors = _vectors(dataset)
    ids, texts = list(dataset.corpus), list(dataset.corpus.values())
    exact = VectorFaiss("flat", build_index(vectors, IndexSpec("Flat")), ids, vectors, texts)
    evaluate(exact, dataset, queries, qrels, "compute-all cosine (mean)", {"split": split})
    for K in (5, 8, 10):
        t0 = time.perf_counter()
        tree = KMeansTree.build(vectors, TreeConfig(branching=K))
        build_s = time.perf_counter() - t0
        r = TreeRetriever(tree, ids, texts, None, beam=20)
        evaluate(r, dataset, queries, qrels, f"{K}-K tree (beam=N=20)",
                 {"split": split, "build_seconds": round(build_s, 2), **tree.stats()})


def curve(split: str) -> None:
    from core.retrieval.tree import TreeRetriever
    from core.retrieval.tree_search import KMeansTree, TreeConfig

    dataset, queries, qrels = setup(split)
    vectors = _vectors(dataset)
    ids, texts = list(dataset.corpus), list(dataset.corpus.values())
    n = len(vectors)
    shapes = [(K, 0, False) for K in (5, 8, 10)] + [(K, 32, True) for K in (5, 8, 10)]
    for K, leaf, balanced in shapes:
        t0 = time.perf_counter()
        tree = KMeansTree.build(vectors, TreeConfig(branching=K, leaf_size=leaf, balanced=balanced))
        build_s = round(time.perf_counter() - t0, 2)
        r = TreeRetriever(tree, ids, texts, None)
        for beam, probes in ((10, None), (20, None), (40, None), (80, None), (160, None), (40, 2), (80, 2), (160, 2)):
            r.set_params(beam=beam, probes=probes or 0)
            evaluate(r, dataset, queries, qrels, "tree", {"K": K, "leaf_size": leaf or K, "balanced": balanced,
                                                           "beam": beam, "probes": probes or K,
                                                           "build_seconds": build_s, "split": split})
    for factory, params in (("IVF{nl},Flat", [f"nprobe={p}" for p in (1, 2, 4, 8, 16, 32)]),
                            ("HNSW32,Flat", [f"efSearch={e}" for e in (16, 32, 64, 128)])):
        from core.retrieval.indexing import scaled_nlist

        spec = IndexSpec(factory.format(nl=scaled_nlist(n)))
        t0 = time.perf_counter()
        index = build_index(vectors, spec)
        build_s = round(time.perf_counter() - t0, 2)
        r = VectorFaiss(spec.factory, index, ids, vectors, texts)
        for p in params:
            set_search_params(index, p)
            evaluate(r, dataset, queries, qrels, f"faiss {spec.factory}", {"params": p, "build_seconds": build_s,
                                                                           "split": split})


def pair_auc(n_pairs: int) -> None:
    """ROC AUC (sklearn) of the cross-encoder and the pretrained bi-encoder cosine on held-out test pairs."""
    from sklearn.metrics import roc_auc_score

    from core.serving.loader import load as load_system
    from core.retrieval import bert

    dataset, _, _ = setup("test")
    pairs = dataset.pairs["test"]
    if n_pairs and n_pairs < len(pairs):  # 0 = every held-out test pair
        pick = sorted(np.random.default_rng(13).choice(len(pairs), n_pairs, replace=False))
        pairs = [pairs[i] for i in pick]
    labels = [int(p.label > 0) for p in pairs]
    ce = load_system("cross-encoder", dataset)
    t0 = time.perf_counter()
    s_ce = ce.score_pairs([dataset.corpus[p.id1] for p in pairs], [dataset.corpus[p.id2] for p in pairs])
    seconds = time.perf_counter() - t0
    vectors = bert.collection_embeddings(dataset, "mean")
    row = {d: i for i, d in enumerate(dataset.corpus)}
    s_bi = (vectors[[row[p.id1] for p in pairs]] * vectors[[row[p.id2] for p in pairs]]).sum(1)
    emit({"what": "pair ROC AUC on held-out test pairs", "pairs": len(pairs), "positives": sum(labels),
          "cross_encoder_auc": round(float(roc_auc_score(labels, s_ce)), 4),
          "minilm_mean_cosine_auc": round(float(roc_auc_score(labels, s_bi)), 4),
          "cross_encoder_pairs_per_second": round(len(pairs) / seconds, 1)})


def best(split: str) -> None:
    """The curve's picks on the full protocol: wider-beam 10-K trees vs faiss IVF / HNSW at similar cost."""
    from core.retrieval.indexing import scaled_nlist
    from core.retrieval.tree import TreeRetriever
    from core.retrieval.tree_search import KMeansTree, TreeConfig

    dataset, queries, qrels = setup(split)
    vectors = _vectors(dataset)
    ids, texts = list(dataset.corpus), list(dataset.corpus.values())
    tree = KMeansTree.build(vectors, TreeConfig(branching=10))
    r = TreeRetriever(tree, ids, texts, None)
    for beam in (40, 80):
        r.set_params(beam=beam)
        evaluate(r, dataset, queries, qrels, "tree", {"K": 10, "leaf_size": 10, "balanced": False, "beam": beam,
                                                       "probes": 10, "split": split})
    for factory, params in ((f"IVF{scaled_nlist(len(vectors))},Flat", ("nprobe=4", "nprobe=8")),
                            ("HNSW32,Flat", ("efSearch=32", "efSearch=64"))):
        index = build_index(vectors, IndexSpec(factory))
        fr = VectorFaiss(factory, index, ids, vectors, texts)
        for p in params:
            set_search_params(index, p)
            evaluate(fr, dataset, queries, qrels, f"faiss {factory}", {"params": p, "split": split})


def cross(split: str, n_queries: int, budgets: list[int]) -> None:
    from core.serving.loader import load as load_system

    dataset, queries, qrels = setup(split)
    qids = sorted(np.random.default_rng(13).choice(sorted(queries), n_queries, replace=False).tolist())
    sample = {q: queries[q] for q in qids}
    sub_qrels = {q: qrels[q] for q in qids}
    for budget in budgets:
        r = load_system("tree-bert-cross", dataset, budget=budget)
        evaluate(r, dataset, sample, sub_qrels, "interaction-based tree (cross-encoder)",
                 {"split": split, "budget": budget, "beam": r.config.beam, "reps": r.config.reps, "K": r.tree.config.branching})
    bi = load_system("tree-bert", dataset)
    evaluate(bi, dataset, sample, sub_qrels, f"{bi.tree.config.branching}-K tree (beam=N=20), same sample", {"split": split})
    flat = load_system("minilm", dataset, "mean")
    faiss.omp_set_num_threads(1)
    evaluate(flat, dataset, sample, sub_qrels, "compute-all cosine (mean), same sample", {"split": split})
    ce = load_system("cross-encoder", dataset)
    cand = flat.search_many(sample, k=20)
    t0 = time.perf_counter()
    rr = ce.rerank_many(sample, cand, dataset.corpus, k=20)
    scores = evaluate_run(sub_qrels, rr, METRICS)
    emit({"system": "compute-all top-20 reranked by cross-encoder, same sample", "queries": len(sample),
          **{m: round(v, 4) for m, v in scores.items()}, "pair_scorings": 20.0,
          "ms_per_query": round(1000 * (time.perf_counter() - t0) / len(sample), 1), "split": split})


def finetuned(split: str) -> None:
    from core.serving.loader import load as load_system
    from core.retrieval.tree import TreeRetriever
    from core.retrieval.tree_search import KMeansTree, TreeConfig
    from core.retrieval import bert

    dataset, queries, qrels = setup("test")
    for variant in ("mean", "finetuned"):
        r = load_system("minilm", dataset, variant)
        faiss.omp_set_num_threads(1)
        evaluate(r, dataset, queries, qrels, f"compute-all cosine ({variant})", {"split": "test"})
        vectors = bert.collection_embeddings(dataset, variant)
        ids, texts = list(dataset.corpus), list(dataset.corpus.values())
        tree = KMeansTree.build(vectors, TreeConfig(branching=8))
        evaluate(TreeRetriever(tree, ids, texts, None, beam=20), dataset, queries, qrels,
                 f"8-K tree (beam=N=20) on {variant}", {"split": "test"})


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--split")]
    split = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--split=")), "all")
    what = args[0] if args else "trees"
    if what == "poolings":
        poolings(split)
    elif what == "trees":
        trees(split)
    elif what == "curve":
        curve(split)
    elif what == "cross":
        cross("test" if split == "all" else split, int(args[1]) if len(args) > 1 else 30,
              [int(b) for b in args[2:]] or [1500])
    elif what == "pairauc":
        pair_auc(int(args[1]) if len(args) > 1 else 0)
    elif what == "best":
        best(split)
    elif what == "finetuned":
        finetuned(split)
    else:
        raise SystemExit(__doc__)
