"""One A/B measurement in a fresh process, run by ``bench.harness_fresh.section_ab`` for a code tree (today's
worktree or the current checkout): ``python bench/ab_child.py ROOT TASK JSON`` prints ``RESULT {json}``.

Kept free of anything the older tree lacks: it uses only ``compare.compare``, ``core.registry``,
``core.retrieval.bert.load_encoder`` and the dataset loader, which both trees have (before the core/
regrouping they were ``core.compare`` and ``core.data``: ``_module`` tries the new path, then the old).

Tasks
- ``compare``: the Compare page's whole query (``core.analysis.compare.compare`` as the page calls it) for the
  given choices, warm (2 warm-up queries), p50/p95 over ``n`` sampled queries, each query removed from
  its own ranking (``query_id``).
- ``encode``: MiniLM (mean pooling) questions/s on ``n`` collection questions, warm (one warm-up batch).
- ``first_view``: the Error Analysis page's default first view in the current tree: labels of the
  default split, the default systems' runs (stored runs, ``core.analysis.runs.load_runs``), ``analyze``.
"""
from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _module(new: str, old: str):
    """``new`` (regrouped core/) or, in an older tree, ``old``."""
    import importlib

    try:
        return importlib.import_module(new)
    except ModuleNotFoundError:
        return importlib.import_module(old)


def main() -> int:
    root, task, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    args = json.loads(raw)
    t_start = time.perf_counter()
    import numpy as np

    import core  # noqa: F401
    load_dataset = _module("core.data.datasets", "core.data").load_dataset

    ds = load_dataset(args.get("dataset", "qqp-bimpm"))
    rng = np.random.default_rng(args.get("seed", 14))
    if task == "compare":
        cmp = _module("core.analysis.compare", "core.compare")
        SystemChoice, compare = cmp.SystemChoice, cmp.compare
        try:  # the one loader; older trees: core.registry.load_system
            from core.serving.loader import load as load_system
        except ModuleNotFoundError:
            from core.registry import load_system

        cache: dict = {}

        def load(name, variant=None, options=()):
            key = (name, variant, tuple(options))
            if key not in cache:
                cache[key] = load_system(name, ds, variant=variant, **dict(options))
            return cache[key]

        if args.get("page_defaults"):  # the Compare page's own default state in this tree (index, tree knobs)
            from core.judging.compare_state import CompareState

            names = [c["name"] for c in args["choices"]]
            state = CompareState(ds.name, systems=tuple(n for n in names if n != "frm"),
                                 rerankers=tuple(n for n in names if n == "frm"))
            choices = state.choices()
        else:
            choices = [SystemChoice(c["name"], variant=c.get("variant"),
                                    options=tuple(tuple(o) for o in c.get("options", ())),
                                    first_stage=c.get("first_stage"), depth=c.get("depth", 20))
                       for c in args["choices"]]
        qids = sorted(ds.queries)
        pick = [qids[i] for i in rng.choice(len(qids), size=args["n"] + 2, replace=False)]
        for q in pick[:2]:
            compare(ds, ds.queries[q], choices, load, k=10, query_id=q)
        secs, per = [], {}
        errors = {}
        for q in pick[2:]:
            t0 = time.perf_counter()
            res = compare(ds, ds.queries[q], choices, load, k=10, query_id=q)
            secs.append(time.perf_counter() - t0)
            for r in res.results:
                if r.ok:
                    per.setdefault(r.choice.label, []).append(r.ranking.seconds)
                else:
                    errors[r.choice.label] = (r.error or "")[:200]
        out = {"seconds": secs, "per_system_p50_ms": {k: 1000 * float(np.median(v)) for k, v in per.items()},
               "errors": errors, "choices": [[c.label, list(c.options)] for c in choices]}
    elif task == "encode":
        import torch

        from core.retrieval import bert

        enc = bert.load_encoder(ds, "mean")
        texts = list(ds.corpus.values())
        pick = [texts[i] for i in rng.choice(len(texts), size=args["n"], replace=False)]
        enc.encode(pick[:64])
        t0 = time.perf_counter()
        vectors = enc.encode(pick, batch_size=128)
        secs = time.perf_counter() - t0
        out = {"questions": len(pick), "seconds": secs, "questions_per_s": len(pick) / secs,
               "backend": getattr(enc, "backend", "torch"), "torch_threads": torch.get_num_threads()}
        if args.get("save"):
            np.save(args["save"], vectors)
            json.dump(pick, open(args["save"] + ".texts.json", "w"))
    elif task == "first_view":
        from core.analysis.error_analysis import ANALYSIS_METRICS, analyze
        from core.analysis.label_sources import label_set
        from core.analysis.runs import default_split, load_runs

        t_import = time.perf_counter() - t_start
        t_warm = None
        if args.get("warm"):  # a started server: the app warmed ranx in the background (app.py)
            from core.evaluation import warm_up

            t_warm = warm_up(tuple(list(ds.queries)[:2] + list(ds.corpus)[:3]))
        t_view = time.perf_counter()
        split = default_split(ds)
        labels = label_set(ds, None, "dataset", split)
        names = args["systems"]
        t0 = time.perf_counter()
        runs = load_runs(ds, names, labels.queries, k=100)
        t_runs = time.perf_counter() - t0
        res = analyze(labels, runs, names[0], list(ANALYSIS_METRICS), "student")
        now = time.perf_counter()
        out = {"split": split, "queries": res.queries, "systems": names, "import_and_data_s": t_import,
               "warm_up_s": t_warm, "runs_s": t_runs, "view_s": now - t_view, "total_s": now - t_start,
               "map@100": {s: res.scores[s]["map@100"] for s in res.systems}}
    else:
        raise SystemExit(f"unknown task {task}")
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
