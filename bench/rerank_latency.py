"""FRM rerank latency, 1 query × 20 candidates (the Compare page's FRM column), warm.

Measures ``FRMReranker.score_pairs`` for held-out test queries against their BM25 top-20 (query removed from its
own ranking; random collection questions when BM25 is not built), wall and CPU time per query. ``--code-root``
imports the package from another checkout (e.g. ``git worktree add /tmp/frm-base <commit>``), so the old and the
new code are timed in the same invocation (``--compare``), alternating to spread load drift over both.
``--untrained`` times a freshly initialised FRM (same shapes and work as a trained one) so no build is needed.

Usage: QRS_VAR=... python bench/rerank_latency.py [--threads 2] [--n 30] [--untrained]
       [--compare /tmp/frm-base] [--rounds 2] [--out JSON]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def measure(args) -> dict:
    sys.path.insert(0, str(Path(args.code_root or HERE).resolve()))
    import numpy as np
    import torch

    from core.data.datasets import load_dataset
    from core.data.keywords import LexicalStats
    from core.rerank import frm as F

    torch.set_num_threads(args.threads)
    ds = load_dataset("qqp-bimpm")
    t0 = time.perf_counter()
    if args.untrained:
        torch.manual_seed(0)
        rr = F.FRMReranker(F.FRM(F.FRMConfig()), F.Featurizer(LexicalStats.from_texts(ds.corpus.values()), 32),
                           store=F.VectorStore.for_encoder(32))
    else:
        rr = F.load(ds)
    load_s = time.perf_counter() - t0
    qids = sorted(ds.split_queries("test"))[: args.n + 1]
    try:
        from core.registry import load_system

        bm25 = load_system("bm25", ds)
        cands = {q: r.doc_ids for q, r in bm25.search_many({q: ds.queries[q] for q in qids}, k=20,
                                                           ignore_identical_ids=True).items()}
        source = "bm25 top-20"
    except Exception:  # noqa: BLE001 - BM25 not built here
        ids = list(ds.corpus)
        rng = np.random.default_rng(0)
        cands = {q: [ids[i] for i in rng.choice(len(ids), 20, replace=False)] for q in qids}
        source = "random 20"
    if args.untrained:  # what the build caches (POS of the collection): tag these texts once, untimed
        rr.featurizer.features([ds.queries[q] for q in qids] + [ds.corpus[d] for q in qids for d in cands[q]])
    first = qids[0]
    rr.score_pairs([ds.queries[first]] * 20, [ds.corpus[d] for d in cands[first]])  # warm-up
    wall, cpu = [], []
    for q in qids[1:]:
        docs = [ds.corpus[d] for d in cands[q]]
        w0, c0 = time.perf_counter(), time.process_time()
        rr.score_pairs([ds.queries[q]] * len(docs), docs)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    ms = lambda xs, p: round(1000 * float(np.percentile(xs, p)), 2)  # noqa: E731
    return {"code": str(Path(args.code_root or HERE).resolve()), "wall_p50_ms": ms(wall, 50), "wall_p90_ms": ms(wall, 90),
            "cpu_p50_ms": ms(cpu, 50), "n": len(wall), "threads": args.threads, "candidates": source,
            "untrained": bool(args.untrained), "load_seconds": round(load_s, 2),
            "load_avg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--untrained", action="store_true")
    ap.add_argument("--code-root", default=None)
    ap.add_argument("--compare", default=None, help="another checkout to time against this one, alternating")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not args.compare:
        print(json.dumps(measure(args)))
        return
    rows = []
    for _ in range(args.rounds):
        for root in (args.compare, str(HERE)):
            cmd = [sys.executable, __file__, "--threads", str(args.threads), "--n", str(args.n), "--code-root", root]
            cmd += ["--untrained"] if args.untrained else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append(json.loads(out))
            print(out, flush=True)
    import numpy as np

    summary = {}
    for root in (args.compare, str(HERE)):
        mine = [r for r in rows if r["code"] == str(Path(root).resolve())]
        summary[root] = {k: float(np.median([r[k] for r in mine])) for k in ("wall_p50_ms", "cpu_p50_ms")}
    base, new = summary[args.compare], summary[str(HERE)]
    summary["speedup_wall_p50"] = base["wall_p50_ms"] / new["wall_p50_ms"]
    summary["speedup_cpu_p50"] = base["cpu_p50_ms"] / new["cpu_p50_ms"]
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
