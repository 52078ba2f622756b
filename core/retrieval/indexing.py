"""faiss indexes from a factory string, with the papers' settings as named presets.

Presets (inner product on L2-normalised vectors = cosine):

==================  ==============================  =============  ==============================
preset              factory                         search params  paper
==================  ==============================  =============  ==============================
``flat``            ``Flat``                        —              exact ("compute-all")
``ivfpq``           ``IVF{nlist},PQ{m}x8``          ``nprobe=10``  DenseTrans §4.2.3: 2000 lists, 16×8-bit
``ivf``             ``IVF{nlist},Flat``             ``nprobe=10``  SDML §4.3: 2000 lists
``hnsw``            ``HNSW32,Flat``                 ``efSearch=64`` —
``auto``            ``Flat`` below 1M vectors,      —/``efSearch=  serving default
                    else ``HNSW32,Flat``            128``
==================  ==============================  =============  ==============================

``auto`` is the serving default of the trained first-stage encoders: exact search below
``EXACT_BELOW`` (1M) vectors — on the QQP collection a batched exact search is fast and keeps the
exact top-100, which the paper's IVFPQ does not (bench/reports/first_stage.md) — and HNSW above
(HNSW32 efSearch 64 keeps nearly all of DenseTrans's exact top-100 on QQP; not measured at 1M). The other presets stay available (Compare's index knob, ``load(index=…)``)
to show the ANN trade-off.

Metric: inner product by default; ``IndexSpec(metric="l2")`` ranks by squared Euclidean distance
(SDML, whose loss is defined on it); a ``DenseRetriever`` then reports scores as −distance.

Scaling nlist: the papers' 2000 lists were for collections of ~0.5M questions; on 36.7k vectors that
would leave ~18 vectors per list, below faiss's 39-per-centroid training minimum. We use faiss's rule
of thumb nlist = 4·√N (767 for 36,737), capped at N/39 so every centroid has enough training points.
``m`` (PQ sub-vectors) is 16 as in the paper when it divides the dimension, else the largest divisor
of the dimension that is ≤ 16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from core.artifacts import load_json, save_json
from core.errors import MissingArtifactError, UnknownNameError
from core.retrieval.vector_shards import ShardManifest

PRESETS = {
    "flat": ("Flat", ""),
    "ivfpq": ("IVF{nlist},PQ{m}x8", "nprobe=10"),
    "ivf": ("IVF{nlist},Flat", "nprobe=10"),
    "hnsw": ("HNSW32,Flat", "efSearch=64"),
    "auto": ("Flat", ""),  # resolved by size in IndexSpec.from_preset
}
EXACT_BELOW = 1_000_000  # "auto": exact search below this many vectors, HNSW32 efSearch=128 above
METRICS = {"ip": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}


def scaled_nlist(n: int) -> int:
    """nlist = 4·√N, capped at N/39 (faiss needs ≥ 39 training points per centroid), at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def pq_subvectors(dim: int, wanted: int = 16) -> int:
    return max(m for m in range(1, wanted + 1) if dim % m == 0)


@dataclass(frozen=True)
class IndexSpec:
    """A concrete index: the factory string and its search parameters."""

    factory: str
    search_params: str = ""
    metric: str = "ip"  # "ip" (inner product = cosine on unit vectors) or "l2" (squared Euclidean)

    @classmethod
    def from_preset(cls, preset: str, n: int, dim: int, metric: str = "ip") -> IndexSpec:
        if metric not in METRICS:
            raise UnknownNameError("index metric", metric, list(METRICS))
        if preset not in PRESETS:
            if "," in preset or preset in ("Flat",) or preset.startswith(("IVF", "HNSW", "PQ")):
                return cls(preset, metric=metric)
            raise UnknownNameError("index preset", preset, list(PRESETS))
        if preset == "auto":
            if n < EXACT_BELOW:
                return cls("Flat", "", metric)
            return cls("HNSW32,Flat", "efSearch=128", metric)
        factory, params = PRESETS[preset]
        factory = factory.format(nlist=scaled_nlist(n), m=pq_subvectors(dim))
        if "x8" in factory and n < 39 * 256:  # PQ wants ≥ 39·2^nbits training points: small collections get fewer bits
            factory = factory.replace("x8", f"x{max(1, min(8, int(math.log2(max(2, n // 39)))))}")
        return cls(factory, params, metric)


def build_index(vectors: np.ndarray, spec: IndexSpec, seed: int = 13) -> faiss.Index:
    """Train (if needed) and fill an index: inner product over L2-normalised float32 vectors, or
    squared Euclidean distance when ``spec.metric == "l2"`` (SDML, sdml-bonadiman2019.md §2.1.2)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.index_factory(vectors.shape[1], spec.factory, METRICS[spec.metric])
    if not index.is_trained:
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.cp.seed = seed
        index.train(vectors)
    index.add(vectors)
    set_search_params(index, spec.search_params)
    return index


TRAIN_SAMPLE = 100_000  # vectors an IVF / HNSW index built from shards is trained on at most (a seeded sample)


def build_index_from_shards(manifest: ShardManifest, spec: IndexSpec, seed: int = 13,
                            train_sample: int = TRAIN_SAMPLE) -> faiss.Index:
    """An index over a collection's on-disk shards (``core.retrieval.vector_shards``), filled a shard at a time with
    each vector's collection row as its id (``IndexIDMap2``: searches return rows, as ``build_index``'s). An index
    that trains (IVF, PQ) is trained on a seeded sample of ``train_sample`` rows read from the shards, so memory holds
    the index, the sample and one shard, never a second copy of the collection."""
    base = faiss.index_factory(manifest.dim, spec.factory, METRICS[spec.metric])
    if not base.is_trained:
        ivf = faiss.try_extract_index_ivf(base)
        if ivf is not None:
            ivf.cp.seed = seed
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(manifest.count, size=min(train_sample, manifest.count), replace=False))
        base.train(np.ascontiguousarray(manifest.gather(rows)))
    index = faiss.IndexIDMap2(base)
    for rows, vectors in manifest.iter_shards():
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), rows)
    set_search_params(index, spec.search_params)
    return index


def recall_at_k(index: faiss.Index, exact: faiss.Index, queries: np.ndarray, k: int = 10) -> float:
    """Mean share of the exact top ``k`` that ``index`` returns for ``queries`` (faiss ``contrib`` style)."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    _, found = index.search(queries, k)
    _, truth = exact.search(queries, k)
    return float(np.mean([len(set(f[f >= 0]) & set(t[t >= 0])) / max(1, len(t[t >= 0]))
                          for f, t in zip(found, truth)]))


def set_search_params(index: faiss.Index, params: str) -> None:
    """Apply ``"nprobe=10"`` / ``"efSearch=64"`` style parameters (faiss ParameterSpace)."""
    if params:
        faiss.ParameterSpace().set_index_parameters(index, params)


def save_index(folder: Path, index: faiss.Index, spec: IndexSpec, encoder_id: str, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "index.faiss.tmp"
    faiss.write_index(index, str(tmp))
    tmp.replace(folder / "index.faiss")
    save_json(folder / "index.json", {"factory": spec.factory, "search_params": spec.search_params,
                                      "metric": spec.metric, "encoder": encoder_id, "count": count})


def load_index(folder: Path, command: str) -> tuple[faiss.Index, IndexSpec, dict]:
    meta = load_json(folder / "index.json", f"the faiss index in {folder.name}", command)
    path = folder / "index.faiss"
    if not path.is_file():
        raise MissingArtifactError(f"the faiss index in {folder.name}", command)
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as exc:
        raise MissingArtifactError(f"the faiss index in {folder.name}", command, f"corrupt ({exc})") from None
    spec = IndexSpec(meta["factory"], meta.get("search_params", ""), meta.get("metric", "ip"))
    set_search_params(index, spec.search_params)
    return index, spec, meta


def distance_counter(index: faiss.Index):
    """A callable returning distance computations since the last call (IVF and HNSW stats; Flat = N)."""
    inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap) else index  # from shards
    if faiss.try_extract_index_ivf(inner) is not None:
        stats = faiss.cvar.indexIVF_stats
    elif "HNSW" in type(inner).__name__:
        stats = faiss.cvar.hnsw_stats
    else:
        stats = None

    def reset() -> None:
        if stats is not None:
            stats.reset()

    def read(n_queries: int) -> float:
        if stats is None:
            return float(index.ntotal)
        return float(stats.ndis) / max(1, n_queries)

    return reset, read
