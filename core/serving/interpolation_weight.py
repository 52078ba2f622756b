"""Choose a trained reranker's interpolation weight α on the dev split, through the one loader.

The rule, the grid and the stored record are ``core.rerank.interpolation``'s (``RULE``, ``choose``, ``write``);
this module only ranks the dev queries with the first stage and scores their candidates with the reranker
and with its partner (the registration's held-out reference: the first stage's own scores when it is the
first stage), which is serving's job, and hands the scores to ``choose``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.registry import default_first_stage, get_spec, rerank_depth
from core.rerank.interpolation import DEV_QUERIES, Interpolation, choose, path_for, write
from core.serving.loader import load


def choose_for(dataset, system: str, variant: str | None, folder: Path, progress=None) -> Interpolation | None:
    """Choose and store α for a built reranker on ``dataset``'s dev split (None: no dev split or not a reranker
    over a collection). The reranker is loaded through the one loader, without any stored α."""
    FIRST_STAGE, RERANK_DEPTH = default_first_stage(), rerank_depth()

    dev_ids = sorted(dataset.split_queries("dev")) if dataset.query_splits.get("dev") else []
    if not dev_ids or dataset.candidates:
        return None
    if DEV_QUERIES and len(dev_ids) > DEV_QUERIES:
        dev_ids = sorted(np.random.default_rng(13).choice(dev_ids, DEV_QUERIES, replace=False).tolist())
    stale = path_for(folder)
    if stale.exists():
        stale.unlink()  # choose on the reranker's own scores
    reranker = load(system, dataset, variant)
    first = load(FIRST_STAGE, dataset)
    queries = {q: dataset.queries[q] for q in dev_ids}
    cands = first.search_many(queries, k=RERANK_DEPTH, ignore_identical_ids=dataset.ignore_identical_ids)
    flat_q, flat_d, owners = [], [], []
    for q, r in cands.items():
        for d in r.doc_ids:
            flat_q.append(queries[q])
            flat_d.append(dataset.corpus[d])
            owners.append(q)
    partner_name = get_spec(system.split("@")[0]).reference or FIRST_STAGE
    partner = None if partner_name == FIRST_STAGE else load(partner_name, dataset)
    scores = np.empty(len(flat_q))
    other = np.empty(len(flat_q))
    for s in range(0, len(flat_q), 1024):
        scores[s:s + 1024] = reranker.score_pairs(flat_q[s:s + 1024], flat_d[s:s + 1024])
        if partner is not None:
            other[s:s + 1024] = partner.score_pairs(flat_q[s:s + 1024], flat_d[s:s + 1024])
        if progress is not None:
            progress(min(1.0, (s + 1024) / max(1, len(flat_q))), f"interpolation weight on dev: {s + 1024}/{len(flat_q)} pairs")
    dev_scores, pos = {}, 0
    for q, r in cands.items():
        n = len(r.doc_ids)
        mine = other[pos:pos + n].tolist() if partner is not None else list(r.scores)
        dev_scores[q] = (list(r.doc_ids), scores[pos:pos + n].tolist(), mine)
        pos += n
    alpha, table = choose(dev_scores, {q: dataset.qrels.get(q, {}) for q in dev_ids})
    chosen = Interpolation(weight=alpha, first_stage=FIRST_STAGE, depth=RERANK_DEPTH, dev_queries=len(dev_ids), dev=table,
                           partner=partner_name)
    write(folder, chosen)
    return chosen
