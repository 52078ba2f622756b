"""Fusion against its parts on a split (BENCHMARKS.md, fusion section): ranx metrics and paired t-tests.

    python -m bench.fusion_eval --parts bm25+minilm bm25+densetrans --split test

Builds (tunes on dev) every ``PARTS:METHOD`` fusion that is not built yet, reads each system's run
over the split (stored runs where fresh, computed otherwise; QQP: each query removed from its own
ranking), and reports each fusion against each of its parts with ranx ``compare`` (paired Student's
t-test, p < 0.05 marked). Writes ``bench/reports/fusion.md`` and ``.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

METRICS = ["map@100", "mrr@100", "ndcg@10", "precision@1", "recall@100"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="qqp-bimpm")
    p.add_argument("--parts", nargs="+", default=["bm25+minilm", "bm25+densetrans"])
    p.add_argument("--methods", default="rrf,combsum,wsum")
    p.add_argument("--split", default="test")
    p.add_argument("--out", default=str(HERE / "reports" / "fusion"))
    args = p.parse_args(argv)
    import core  # noqa: F401
    from core.retrieval import fusion
    from core.data.datasets import load_dataset
    from core.evaluation import compare_runs, evaluate_run
    from core.analysis.runs import load_runs
    from core.serving.loader import part_loader

    ds = load_dataset(args.dataset)
    qrels = ds.split_qrels(args.split)
    queries = {q: ds.queries[q] for q in qrels}
    rows, report = [], {"dataset": ds.name, "split": args.split, "queries": len(queries), "fusions": {}}
    for parts in args.parts:
        variants = [f"{parts}:{m}" for m in args.methods.split(",")]
        for v in variants:
            if not fusion.is_built(ds, v):
                print(f"[fusion] tuning {v} on dev ...", flush=True)  # no stored run here: `build` writes those
                print(f"[fusion] {v}: {fusion.build(ds, variant=v, loader=part_loader(ds))}", flush=True)
        spec = fusion.parse_variant(variants[0])
        part_names = [s + (f"@{pv}" if pv else "") for s, pv in spec.parts]
        t0 = time.perf_counter()
        runs = load_runs(ds, part_names, queries, k=100,
                         progress=lambda f, m: print(f"\r[fusion] {m[-70:]:70s}", end="", flush=True))
        # each fusion fuses its parts' top 100 (self removed): exactly FusionRetriever.search_many
        # (tests/test_runs.py checks the equality), so the parts' runs are fused once here
        for v in variants:
            if fusion.is_built(ds, v):
                config = fusion.load_config(ds, v)
                runs.append(fusion.fuse_runs(runs[:len(part_names)], config.method, config.params, f"fusion@{v}"))
        names = [r.name for r in runs]
        print(f"\n[fusion] runs of {', '.join(names)} in {time.perf_counter() - t0:.0f}s", flush=True)
        scores = {r.name: evaluate_run(qrels, r, METRICS) for r in runs}
        cmp = compare_runs(qrels, runs, METRICS, stat_test="student", max_p=0.05)
        for r in runs:
            row = {"system": r.name, **{m: round(scores[r.name][m], 4) for m in METRICS}}
            if r.name.startswith("fusion@"):
                config = fusion.load_config(ds, r.name.split("@", 1)[1])
                row["params"] = json.dumps(config.params)
                for part in part_names:
                    pv = {m: float(cmp.comparisons[r.name, part][m]["p_value"]) for m in METRICS}
                    row[f"p vs {part}"] = ", ".join(f"{m.split('@')[0]} {pv[m]:.1e}" for m in ("map@100", "precision@1"))
                    row[f"sig vs {part}"] = "".join(
                        ("+" if scores[r.name][m] > scores[part][m] else "-") if pv[m] < 0.05 else "=" for m in METRICS)
            rows.append(row)
        report["fusions"][parts] = {"names": names, "scores": scores}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report["rows"] = rows
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    cols = ["system", *METRICS, "params"] + sorted({k for r in rows for k in r if k.startswith(("p vs", "sig vs"))})
    md = [f"{len(queries):,} {args.split} queries of {ds.name} (each query removed from its own ranking); "
          f"`sig vs X`: per metric ({', '.join(METRICS)}), + / - significantly better / worse than X "
          "(paired t-test, ranx compare, p < 0.05), = no significant difference.", "",
          "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    out.with_suffix(".md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
