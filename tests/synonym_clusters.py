"""The toy set the dense encoders' tests train on: paraphrase clusters whose questions name a concept by one of
two synonyms, so that only a trained encoder matches them."""
from __future__ import annotations

import numpy as np

from core.data.clusters import dataset_from_pairs

__all__ = ["synonym_clusters"]


def synonym_clusters(n_concepts: int = 100, seed: int = 0):
    """Paraphrase clusters whose questions name a concept by one of two synonyms (alphaC / betaC), so a lexical
    or random encoder cannot match "what is alphaC" with "explain betaC"; each component is two clusters joined by
    a negative pair (so the cluster-disjoint split keeps negatives)."""
    rng = np.random.default_rng(seed)
    filler = [f"w{i}" for i in range(30)]
    rows, pid = [], 0

    def f(k: int) -> str:
        return " ".join(rng.choice(filler, size=k, replace=False))

    for c in range(0, n_concepts, 2):
        groups = []
        for cc in (c, c + 1):
            a, b = f"alpha{cc}", f"beta{cc}"
            groups.append([f"what is {a} {f(2)} ?", f"explain {b} {f(3)} ?", f"{f(1)} {a} or {b} {f(1)} ?"])
        for g in groups:
            for t1, t2 in ((g[0], g[1]), (g[1], g[2])):
                rows.append((1, t1, t2, str(pid)))
                pid += 1
        rows.append((0, groups[0][0], groups[1][0], str(pid)))
        pid += 1
    return dataset_from_pairs("toy", "toy synonyms", rows, tokenized=True)
