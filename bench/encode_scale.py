"""Encoding a large archive on the executor: N questions through the Ray Data actor pool against the single-process
path, then written to faiss and to Milvus, with throughput per core and peak memory.

    python -m bench.encode_scale [--n 1000000] [--single 20000] [--out bench/reports/encode_scale.json]

Texts: N questions sampled from the bundled QQP and TrecQA collections and perturbed (seed 0): each one a sampled
question with one word dropped and two neighbouring words swapped, so the archive is not N copies of 40k texts
(whose token lengths, hence batches, stay realistic). Encoder: the built-in MiniLM (all-MiniLM-L6-v2, mean, max
length 64, ONNX Runtime on CPU). The single-process path encodes the first ``--single`` texts on all cores (the
throughput a build job without the pool would get); the pool encodes all N, one actor per CPU. Peak memory: the
machine's used memory (MemTotal − MemAvailable) sampled every 0.5 s, above its level at the start. Then the
vectors go to a faiss flat index (in process) and to a Milvus collection (a ``milvus-lite server`` child on
127.0.0.1, inserted in batches: ``core.retrieval.milvus.write_collection``).
"""
from __future__ import annotations

import argparse
import os
import platform
import threading
import time
from pathlib import Path

import numpy as np

from bench.error_analysis_speed import python_speed
from bench.reporting import head_commit, write_report

REPORTS = Path(__file__).resolve().parent / "reports"


def archive(n: int, seed: int = 0) -> list[str]:
    """N perturbed questions sampled from QQP's and TrecQA's collections (module docstring)."""
    from core.data.datasets import load_dataset

    base = [t for name in ("qqp-bimpm", "trecqa") for t in load_dataset(name).corpus.values() if len(t.split()) > 3]
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.integers(0, len(base), size=n):
        words = base[i].split()
        del words[int(rng.integers(0, len(words)))]
        j = int(rng.integers(0, len(words) - 1))
        words[j], words[j + 1] = words[j + 1], words[j]
        out.append(" ".join(words))
    return out


class MemoryPeak:
    """The machine's used memory above its level at the start, sampled every half second."""

    def __init__(self) -> None:
        self.start, self.peak, self._stop = self.used(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @staticmethod
    def used() -> float:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) / 1024

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.used() - self.start)

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--single", type=int, default=20_000)
    ap.add_argument("--out", default=str(REPORTS / "encode_scale.json"))
    args = ap.parse_args()
    import faiss
    import torch

    from core.executor import cluster_cpus
    from core.retrieval.bert import MiniLMEncoder
    from core.retrieval.encoding import encode_collection
    from core.retrieval.milvus_client import index_spec, milvus_config
    from core.retrieval.milvus_collections import Layout, write_collection
    from core.retrieval.milvus_server import LocalMilvusServer

    probe_before, load_before = python_speed(), os.getloadavg()
    texts = archive(args.n)
    encoder = MiniLMEncoder.pretrained("mean", 64)
    encoder.encode(texts[:256])  # the ONNX export before the clocks
    start = time.perf_counter()
    single = encoder.encode(texts[:args.single])
    single_seconds = time.perf_counter() - start
    cores = cluster_cpus()
    with MemoryPeak() as memory:
        start = time.perf_counter()
        vectors = encode_collection(encoder, texts, progress=lambda f, m: None)
        pool_seconds = time.perf_counter() - start
    same = float(np.max(np.abs(vectors[:args.single] - single)))
    start = time.perf_counter()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    faiss_seconds = time.perf_counter() - start
    with LocalMilvusServer(ready_timeout=120) as server:
        config = milvus_config(server.uri)

        def batches():
            for s in range(0, len(vectors), config.insert_batch):
                block = vectors[s:s + config.insert_batch].tolist()
                yield [{"pk": s + i, "doc_id": str(s + i), "dense": v} for i, v in enumerate(block)]

        start = time.perf_counter()
        write_collection(config, f"bench_encode_scale_n{len(vectors)}", f"{len(vectors):012x}"[-12:],
                         Layout(vectors.shape[1]), index_spec("flat"), batches(), len(vectors), lambda f, m: None)
        milvus_seconds = time.perf_counter() - start
    report = {
        "command": f"python -m bench.encode_scale --n {args.n} --single {args.single}", "commit": head_commit(),
        "machine": platform.platform(), "cores": os.cpu_count(), "ray_cpus": cores,
        "texts": (f"{args.n:,} questions sampled from QQP's and TrecQA's collections and perturbed (one word dropped, "
                  "two neighbours swapped; seed 0)"),
        "encoder": encoder.encoder_id,
        "single_process": {"texts": args.single, "seconds": round(single_seconds, 1), "torch_threads":
                           torch.get_num_threads(), "texts_per_s": round(args.single / single_seconds, 1),
                           "texts_per_s_per_core": round(args.single / single_seconds / os.cpu_count(), 1)},
        "ray_data_pool": {"texts": args.n, "actors": cores, "seconds": round(pool_seconds, 1),
                          "texts_per_s": round(args.n / pool_seconds, 1),
                          "texts_per_s_per_core": round(args.n / pool_seconds / cores, 1),
                          "peak_memory_mb": round(memory.peak, 1)},
        "max_abs_diff_pool_vs_single_process": same,
        "faiss_flat": {"seconds": round(faiss_seconds, 2), "bytes": int(index.ntotal * vectors.shape[1] * 4)},
        "milvus_flat": {"seconds": round(milvus_seconds, 1), "server": "milvus-lite server on 127.0.0.1",
                        "insert": "batches through core.retrieval.milvus.write_collection (the lite server has no "
                                  "bulk import)"},
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "python_speed_before": probe_before, "python_speed_after": python_speed(),
    }
    write_report(args.out, report)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
