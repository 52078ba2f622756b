"""Fusing rankings with ranx (densetrans-cai2021.md §4.2.1's hybrids of BM25 and embeddings): RRF, CombSUM
(min-max normalised sum) and a weighted sum, on ``{qid: {doc: score}}`` or ranx ``Run`` objects, and their
parameters (RRF's k, the sum's weights) tuned on dev with ranx ``optimize_fusion``. The fusion system (names,
parts, build/load) is ``core.retrieval.fusion``.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

from core.errors import StudioError

FUSION_METHODS = ("rrf", "combsum", "wsum")
RANX_METHOD = {"rrf": "rrf", "combsum": "sum", "wsum": "wsum"}
RANX_NORM = {"rrf": None, "combsum": "min-max", "wsum": "min-max"}
TUNE_METRIC = "map@100"
RRF_K_DEFAULT = 60


def ranx_run(data: Mapping[str, Mapping[str, float]], name: str):
    """``{qid: {doc: score}}`` as a ranx ``Run`` named ``name``."""
    from ranx import Run

    run = Run.from_dict({q: dict(d) for q, d in data.items()}, name=name)
    run.name = name
    return run


def fuse_dicts(parts: Sequence[Mapping[str, Mapping[str, float]]], method: str, params: Mapping | None = None,
               k: int | None = None) -> dict[str, list[tuple[str, float]]]:
    """Fuse per-part ``{qid: {doc: score}}`` with ``ranx.fuse``; ``{qid: [(doc, score), ...]}`` best first.

    A query that a part left empty is fused from the other parts only (ranx needs the same queries in
    every run); with ``wsum`` the remaining parts keep their weights. Ties break by doc id.
    """
    from ranx import fuse

    if method not in FUSION_METHODS:
        raise StudioError(f"fusion method {method!r} is unknown; known: {', '.join(FUSION_METHODS)}")
    params = dict(params or {})
    weights = list(params.get("weights") or [1.0] * len(parts))
    qids = sorted({q for p in parts for q, docs in p.items() if docs})
    groups: dict[tuple[int, ...], list[str]] = {}
    for q in qids:
        groups.setdefault(tuple(i for i, p in enumerate(parts) if p.get(q)), []).append(q)
    out: dict[str, list[tuple[str, float]]] = {}
    for members, group in groups.items():
        runs = [ranx_run({q: parts[i][q] for q in group}, f"part{i}") for i in members]
        if len(members) == 1:  # ranx fuses two or more runs: one answering part is its own fusion
            out.update(_single(runs[0], method, params, weights[members[0]], k))
            continue
        call = {}
        if method == "rrf":
            call = {"k": params.get("k", RRF_K_DEFAULT)}
        elif method == "wsum":
            call = {"weights": [weights[i] for i in members]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's uint64->int64 cast warning inside ranx's min-max
            fused = fuse(runs, norm=RANX_NORM[method], method=RANX_METHOD[method], params=call or None)
        for q, docs in fused.to_dict().items():
            ranked = sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))
            out[q] = [(d, float(s)) for d, s in (ranked[:k] if k else ranked)]
    return out


def _single(run, method: str, params: Mapping, weight: float, k: int | None) -> dict[str, list[tuple[str, float]]]:
    """The fused scores when only one part answered a query: the same formulas with one term."""
    from ranx import normalize

    out = {}
    if method == "rrf":
        rrf_k = params.get("k", RRF_K_DEFAULT)
        for q, docs in run.to_dict().items():
            ranked = sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))
            out[q] = [(d, 1.0 / (rrf_k + i)) for i, (d, _) in enumerate(ranked, start=1)]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            normed = normalize(run, "min-max")
        scale = weight if method == "wsum" else 1.0
        for q, docs in normed.to_dict().items():
            out[q] = [(d, scale * float(s)) for d, s in sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))]
    return {q: v[:k] if k else v for q, v in out.items()}


def fuse_runs(runs: Sequence, method: str, params: Mapping | None = None, name: str = "fusion"):
    """Fuse ranx ``Run`` objects (e.g. stored runs) into one ``Run`` named ``name`` (see ``fuse_dicts``)."""
    fused = fuse_dicts([r.to_dict() for r in runs], method, params)
    return ranx_run({q: dict(v) for q, v in fused.items() if v}, name)


def tune(qrels: Mapping[str, Mapping[str, int]], parts: Sequence[Mapping[str, Mapping[str, float]]], method: str,
         metric: str = TUNE_METRIC) -> dict:
    """ranx ``optimize_fusion`` on ``qrels``: RRF's k or wsum's weights ({} for combsum).

    Only queries that every part answered and that have a relevant item take part (ranx needs the
    same query ids in the qrels and every run).
    """
    from ranx import optimize_fusion

    from core.evaluation import check_metrics, to_qrels

    if method == "combsum":
        return {}
    (metric,) = check_metrics([metric])
    qids = sorted(q for q, rel in qrels.items() if any(v > 0 for v in rel.values()) and all(p.get(q) for p in parts))
    if not qids:
        raise StudioError("no dev query with a relevant item was answered by every part: nothing to tune on")
    runs = [ranx_run({q: p[q] for q in qids}, f"part{i}") for i, p in enumerate(parts)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = optimize_fusion(to_qrels({q: qrels[q] for q in qids}), runs, norm=RANX_NORM[method],
                               method=RANX_METHOD[method], metric=metric)
    if method == "wsum":
        return {"weights": [float(w) for w in best["weights"]]}
    return {"k": int(best["k"])}


def default_params(method: str, n_parts: int) -> dict:
    """A method's untuned parameters (nothing chosen on any labels): RRF k = 60, equal weights, none for CombSUM."""
    if method == "wsum":
        return {"weights": [round(1.0 / n_parts, 6)] * n_parts}
    return {"k": RRF_K_DEFAULT} if method == "rrf" else {}
