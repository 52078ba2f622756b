"""Per-layer measures on QQP from the built models (what the Layers page draws; densetrans-cai2021.md Figures 1
and 3, §4.4.1): the AUC P(cos(q,q⁺) > cos(q,q⁻)) and the paper's mean |log cos(q,q⁺) − log cos(q,q⁻)| with the
triples whose cosine is ≤ 0 excluded and counted (not clipped), each with a 95% bootstrap CI, and the paired
bootstrap CI of the per-layer difference DenseTrans − its −AllDense ablation when both are built.

Usage: nice -n 10 .venv/bin/python -m bench.layers_curves [--queries 500] [--negatives random bm25] [--seed 13]
       [--resamples 1000] [--sources minilm:cls minilm:mean densetrans densetrans:-AllDense densetrans#full600]
       [--out bench/reports/layers_measures_qqp.json]
A source is ``name[:variant or MiniLM pooling][#tag]`` (tag = a first_stage_train.py --tag experiment folder); a
source that is not built is listed with its build command and skipped. Triples (q, q⁺, q⁻) come from the test
split's queries (``core.analysis.layers.sample_triples``); every model sees the same triples, so the CIs are paired.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

PAIR = ("densetrans", "densetrans:-AllDense")  # Figure 3: DenseTrans against −AllDense


def layer_fn(name: str, variant: str | None, tag: str | None, ds):
    """texts -> per-layer vectors of one built model; raises MissingArtifactError when it is not built."""
    from core.serving.loader import load as load_system

    if name == "minilm":
        retriever = load_system("minilm", ds)
        return lambda texts: retriever.layer_embeddings(texts, pooling=variant or "cls")
    if name != "densetrans":
        raise SystemExit(f"no per-layer vectors for {name!r}: use minilm or densetrans")
    from core.errors import MissingArtifactError
    from core.registry import build_command
    from core.retrieval import densetrans

    folder = densetrans._folder(ds, variant, tag)
    model, metrics = folder / "model.pt", folder / "metrics.json"
    if model.is_file() and (not metrics.is_file() or metrics.stat().st_mtime < model.stat().st_mtime):
        # model.pt is the best checkpoint so far while training runs; metrics.json is written when the build ends
        raise MissingArtifactError(f"DenseTrans {variant or 'full'} (training unfinished: {folder.name} has no "
                                   "metrics.json newer than model.pt)", build_command("densetrans", ds.name, variant))
    return densetrans.load(ds, variant=variant, index="flat", tag=tag).layer_embeddings


def pair_model(source: str, ds) -> dict:
    """What a DenseTrans source of the Figure 3 pair is: its recipe (pooling, τ, dropout, width) and where its
    training stopped (the served checkpoint is the best dev step; step 0 = the untrained model)."""
    import json as _json

    from core.retrieval import densetrans

    base, _, tag = source.partition("#")
    name, _, variant = base.partition(":")
    if name != "densetrans":
        return {}
    folder = densetrans._folder(ds, variant or None, tag or None, create=False)
    try:
        config = _json.loads((folder / "config.json").read_text(encoding="utf-8"))
        training = _json.loads((folder / "metrics.json").read_text(encoding="utf-8")).get("training", {})
    except (OSError, ValueError):
        return {"folder": os.path.relpath(folder, ROOT), "built": False}
    return {"folder": os.path.relpath(folder, ROOT), "pooling": config.get("pooling"),
            "temperature": config.get("plan", {}).get("temperature"), "dropout": config.get("dropout"),
            "d_model": config.get("d_model"), "best_step": training.get("best_step"),
            "stopped": training.get("stopped"), "best_dev": training.get("best_dev"),
            "dev_metric": training.get("dev_metric"), "untrained": training.get("best_step") == 0}


def _r(values, digits: int = 4) -> list:
    return [None if v is None or not np.isfinite(v) else round(float(v), digits) for v in np.asarray(values, float)]


def _curve_record(curve, resamples: int, seed: int) -> dict:
    from core.analysis.layers import LayerCurve, bootstrap_ci

    paper = curve.paper
    # within one model, paired over the same triples: does the last layer separate better than the input layer?
    top = LayerCurve(curve.label, curve.pos[-1:], curve.neg[-1:], curve.digest)
    bottom = LayerCurve(curve.label, curve.pos[:1], curve.neg[:1], curve.digest)
    trend = {m: bootstrap_ci(top, m, bottom, n_resamples=resamples, seed=seed).as_dict() for m in ("auc", "paper")}
    clipped = np.abs(np.log(np.maximum(curve.pos, 1e-3)) - np.log(np.maximum(curve.neg, 1e-3))).mean(axis=1)
    return {
        "layers": curve.n_layers, "triples": curve.n_triples,
        "auc": _r(curve.auc), "auc_ci95": bootstrap_ci(curve, "auc", n_resamples=resamples, seed=seed).as_dict(),
        "paper_mean": _r(paper.mean), "paper_signed_mean": _r(paper.signed_mean),
        "paper_ci95": bootstrap_ci(curve, "paper", n_resamples=resamples, seed=seed).as_dict(),
        "excluded": [int(v) for v in paper.excluded], "excluded_share": _r(paper.excluded_share),
        "excluded_pos_nonpositive": [int(v) for v in (curve.pos <= 0).sum(axis=1)],
        "excluded_neg_nonpositive": [int(v) for v in (curve.neg <= 0).sum(axis=1)],
        "old_clipped_mean_1e-3": _r(clipped),
        "mean_cos_pos": _r(curve.pos.mean(axis=1)), "mean_cos_neg": _r(curve.neg.mean(axis=1)),
        "last_minus_layer0_ci95": {m: [t["estimate"][0], t["low"][0], t["high"][0]] for m, t in trend.items()},
    }


def _verdict(block: dict) -> list[str]:
    """What the numbers of one sampler say about Figure 3 (derived from them, nothing else)."""
    curves, diff = block["curves"], block.get("difference")
    lines = []
    for source in PAIR:
        c = curves.get(source)
        if not c or "auc" not in c:
            continue
        for m, key in (("auc", "auc"), ("paper", "paper_mean")):
            v = c[key]
            ci = c[f"{m}_ci95"]
            trend = "rises" if v[-1] > v[0] else "falls"
            lines.append(f"{source} {m}: layer 0 {v[0]} -> last layer {v[-1]} ({trend}; last-layer 95% CI "
                         f"[{ci['low'][-1]}, {ci['high'][-1]}]); excluded per layer {c['excluded']}")
    if diff:
        for m in ("auc", "paper"):
            d = diff[m]
            parts = []
            for layer, (e, lo, hi) in enumerate(zip(d["estimate"], d["low"], d["high"])):
                if lo is None or hi is None:
                    word = "undefined"
                else:
                    word = "DenseTrans higher" if lo > 0 else "DenseTrans lower" if hi < 0 else "CI contains 0"
                parts.append(f"layer {layer}: {e} [{lo}, {hi}] {word}")
            lines.append(f"DenseTrans − (−AllDense), {m}: " + "; ".join(parts))
    return lines


def _figure3(block: dict) -> dict:
    """Figure 3's claim (§4.4.1: −AllDense loses discriminative power with depth, DenseTrans turns the trend up, so
    DenseTrans is the more discriminative at the top) checked on one sampler's numbers, per measure."""
    diff = block.get("difference")
    if not diff:
        return {"verdict": "not tested: DenseTrans and −AllDense are not both built"}
    a, b = block["curves"][PAIR[0]], block["curves"][PAIR[1]]
    out = {}
    for m, key in (("auc", "auc"), ("paper", "paper_mean")):
        d = diff[m]
        finite = [i for i, (lo, hi) in enumerate(zip(d["low"], d["high"])) if lo is not None and hi is not None]
        higher = [i for i in finite if d["low"][i] > 0]
        lower = [i for i in finite if d["high"][i] < 0]
        falls_b = b[key][-1] < b[key][0]
        rises_a = a[key][-1] > a[key][0]
        top = len(d["estimate"]) - 1
        top_higher = top in higher
        verdict = ("reproduced" if falls_b and rises_a and top_higher else
                   "partly reproduced" if top_higher else "not reproduced")
        out[m] = {"verdict": verdict, "allDense_falls_with_depth": falls_b, "densetrans_rises_with_depth": rises_a,
                  "last_layer_difference": [d["estimate"][-1], d["low"][-1], d["high"][-1]],
                  "layers_densetrans_higher_ci": higher, "layers_densetrans_lower_ci": lower}
    return out


def _conclusion(out: dict) -> str:
    """One paragraph on Figure 3 composed from the report's own numbers."""
    parts = []
    for negatives, block in out["by_negatives"].items():
        c = block["curves"].get(PAIR[0], {})
        if "auc" not in c:
            parts.append(f"[{negatives}] DenseTrans is not built: nothing to say about Figure 3.")
            continue
        t = c["last_minus_layer0_ci95"]
        parts.append(
            f"[{negatives} q-] DenseTrans, last layer against layer 0 (paired 95% CI): AUC {t['auc'][0]:+} "
            f"[{t['auc'][1]}, {t['auc'][2]}], paper's measure {t['paper'][0]:+} [{t['paper'][1]}, {t['paper'][2]}]; "
            f"the paper's measure excluded {c['excluded'][-1]} of {c['triples']} triples at the last layer "
            f"(the old 1e-3 clip read {c['old_clipped_mean_1e-3'][-1]} there, against {c['paper_mean'][-1]} with "
            "the exclusions).")
        f3 = block["figure3"]
        if "verdict" in f3:
            parts.append(f"[{negatives} q-] Figure 3 (DenseTrans against −AllDense): {f3['verdict']}.")
        else:
            for m, v in f3.items():
                d = v["last_layer_difference"]
                parts.append(f"[{negatives} q-] Figure 3 by {m}: {v['verdict']} (last layer DenseTrans − "
                             f"(−AllDense) {d[0]:+} [{d[1]}, {d[2]}]; −AllDense falls with depth: "
                             f"{v['allDense_falls_with_depth']}; DenseTrans rises: {v['densetrans_rises_with_depth']}; "
                             f"CI above 0 at layers {v['layers_densetrans_higher_ci']}, below 0 at "
                             f"{v['layers_densetrans_lower_ci']}).")
    return " ".join(parts) + " Every number here is in this report; the verdicts are computed by _figure3 in " \
        "bench/layers_curves.py from the CIs above (reproduced = −AllDense falls, DenseTrans rises and the last-layer " \
        "difference CI lies above 0)."


def main() -> None:
    global PAIR
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--negatives", nargs="+", default=["random", "bm25"])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--sources", nargs="*", default=["minilm:cls", "minilm:mean", "densetrans", "densetrans:-AllDense"])
    ap.add_argument("--pair", nargs=2, default=list(PAIR), metavar=("DENSETRANS", "ALLDENSE"),
                    help="the two sources of Figure 3, e.g. densetrans:paper-objective densetrans:-AllDense#paper-objective "
                         "(the paper's objective: [CLS], τ 1; first_stage_train.py densetrans --variant=-AllDense --tag "
                         "paper-objective --set pooling=cls temperature=1.0 dropout=0.1 position_std=0.0)")
    ap.add_argument("--out")
    args = ap.parse_args()
    PAIR = tuple(args.pair)
    args.sources = list(dict.fromkeys([*args.sources, *PAIR]))
    import torch

    from bench.measure import machine
    from core.analysis.layers import MEASURE_NAMES, bootstrap_ci, discriminativeness, sample_triples
    from core.data.datasets import load_dataset
    from core.errors import MissingArtifactError
    from core.serving.loader import load as load_system
    from core.settings import settings

    torch.set_num_threads(2)
    t_start = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "core/analysis/layers.py", "bench/layers_curves.py"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    ds = load_dataset(args.dataset)
    out = {"command": shlex.join([".venv/bin/python", "-m", "bench.layers_curves", *sys.argv[1:]]),
           "commit": commit + (" (with uncommitted changes to the measure code)" if dirty else ""),
           "machine": machine(), "dataset": ds.name, "split": "test", "queries": args.queries, "seed": args.seed,
           "artifacts": str(settings().var or "var/"),
           "measures": {**MEASURE_NAMES, "old_clipped_mean_1e-3": "the previous measure, for reference only: "
                        "cosines clipped at 1e-3 before the log (each clipped negative adds about 6.9)"},
           "bootstrap": f"{args.resamples} resamples of the sampled queries with replacement (numpy, seed "
                        f"{args.seed}); 95% percentile intervals; the difference is paired (both models scored on "
                        "the same resampled triples); the paper's measure keeps each model's own exclusions",
           "auc_definition": "ROC AUC of the cosine separating the sample's positive pairs (q, q+) from its negative "
                             "pairs (q, q-): P(cos+ > cos-) over all (positive, negative) combinations, ties 1/2 "
                             "(Mann-Whitney with scipy.stats.rankdata; equal to sklearn roc_auc_score)",
           "representations": "(see figure3_pair_models for the recipe and training stop of the pair's two "
                              "models) densetrans = the default (quick-profile) build: mean pooling of the words at every "
                              "layer, τ 0.05, GloVe-50d inputs, 3 layers (the paper: [CLS], τ 1, FastText-300); "
                              "densetrans:-AllDense = the same recipe without dense connections (§4.4.1); layer ℓ "
                              "of DenseTrans is the concatenation the next layer reads (widths d, d, 2d, 4d). "
                              "MiniLM = all-MiniLM-L6-v2 hidden states 0-6, [CLS] or mean pooling (pre-trained on "
                              "data that includes Quora duplicates). QQP: every query is in the collection; the "
                              "sampler never uses a query's own id as q+ or q-.",
           "figure3_pair": list(PAIR),
           "figure3_pair_models": {source: pair_model(source, ds) for source in PAIR},
           "by_negatives": {}}
    bm25 = load_system("bm25", ds) if "bm25" in args.negatives else None
    loaded: dict = {}
    for negatives in args.negatives:
        triples = sample_triples(ds, args.queries, negatives, bm25=bm25, seed=args.seed, split="test")
        block: dict = {"triples": len(triples), "curves": {}}
        built = {}
        for source in args.sources:
            base, _, tag = source.partition("#")
            name, _, variant = base.partition(":")
            t0 = time.perf_counter()
            try:
                if source not in loaded:
                    loaded[source] = layer_fn(name, variant or None, tag or None, ds)
            except MissingArtifactError as exc:
                block["curves"][source] = {"not_built": str(exc)}
                print(f"{source}: not built ({exc})", flush=True)
                continue
            curve = discriminativeness(source, loaded[source], triples)
            built[source] = curve
            block["curves"][source] = {**_curve_record(curve, args.resamples, args.seed),
                                       "seconds": round(time.perf_counter() - t0, 1)}
            fmt = lambda a: " ".join("  nan" if v != v else f"{v:.3f}" for v in a)  # noqa: E731
            print(f"[{negatives}] {source:22s} AUC {fmt(curve.auc)} | paper {fmt(curve.paper.mean)} | excluded "
                  f"{curve.paper.excluded.tolist()}", flush=True)
        if all(s in built for s in PAIR):
            a, b = built[PAIR[0]], built[PAIR[1]]
            block["difference"] = {m: bootstrap_ci(a, m, b, n_resamples=args.resamples, seed=args.seed).as_dict()
                                   for m in ("auc", "paper")}
        block["findings"] = _verdict(block)
        block["figure3"] = _figure3(block)
        for line in block["findings"]:
            print(f"[{negatives}] {line}", flush=True)
        out["by_negatives"][negatives] = block
    out["conclusion"] = _conclusion(out)
    out["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
