"""What the default build produced: per system its build time, how training stopped, its best dev metric
beside its untrained or zero-shot reference, and the held-out test numbers its build measured.

Reads the build's status files (``var/build/<dataset>/*.json``) and each system's ``metrics.json``; runs
nothing. Usage (after ``python -m core build --all``):

    QRS_VAR=... python -m bench.default_build_report [--dataset qqp-bimpm] [--out bench/reports/default_build.json]
    python -m bench.default_build_report --variants-only   # after building recipes and ablations beside it
"""
from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path


from bench.reporting import head_commit, write_report  # noqa: E402


def system_rows(dataset_name: str, variants: bool = False) -> list[dict]:
    """One row per system of the default build, in build order (``variants``: the registered variants, the papers'
    recipes and the ablations, built beside it)."""
    from core.data.datasets import load_dataset
    from core.model_cards import below_reference, metrics_file, training_log
    from core.paths import var_dir
    from core.registry import contamination_note, default_build_targets, list_systems, slug

    ds = load_dataset(dataset_name)
    rows = []
    targets = default_build_targets(ds)
    if variants:  # recipes (registry.Recipe) and ablations built beside the defaults, where built
        default = {(spec.name, v) for spec, v in targets}  # recipes the default build builds are its own rows
        targets = [(spec, v) for spec in list_systems()
                   for v in dict.fromkeys([*spec.variants, *(r.variant for r in spec.recipes)])
                   if (spec.name, v) not in default
                   and (var_dir() / "build" / slug(ds.name) / f"{spec.name}@{slug(v)}.json").is_file()]
    for spec, variant in targets:
        leaf = spec.name + (f"@{slug(variant)}" if variant else "")
        status_path = var_dir() / "build" / slug(ds.name) / f"{leaf}.json"
        status = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else {}
        metrics = metrics_file(ds.name, spec.name, variant) or status.get("metrics") or {}
        log = training_log(ds.name, spec.name, variant, status.get("metrics"))
        row = {"system": spec.name + (f"@{variant}" if variant else ""), "state": status.get("state", "missing"),
               "build_seconds": round(status["finished"] - status["started"], 1)
               if status.get("finished") and status.get("started") else None}
        if log:
            ref = log.get("reference") or {}
            row["training"] = {"dev_metric": log.get("dev_metric"), "best_dev": log.get("best_dev"),
                               "best_step": log.get("best_step"), "stopped": log.get("stopped"),
                               "evaluations": len(log.get("curve", [])),
                               "curve": [[p.get("step"), round(float(p["dev"]), 4)] for p in log.get("curve", [])],
                               "reference": ref.get("system"), "reference_dev": ref.get("dev"),
                               "reference_test": ref.get("test"),
                               "below_reference": below_reference(log)}
        from core.analysis.held_out import held_out_verdict

        verdict = held_out_verdict(ds, spec.name, variant, compute=False)  # what the build computed and cached
        if verdict is not None:
            row["held_out"] = {"reference": verdict.reference, "split": verdict.split, "queries": verdict.queries,
                               "scores": verdict.scores, "reference_scores": verdict.reference_scores,
                               "below_reference": verdict.below}
        tests = {k: v for k, v in metrics.items() if k == "test" or k.startswith("test_")}
        if tests:
            row["test"] = tests
        note = contamination_note(row["system"], ds.name)
        if note:
            row["note"] = note
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--out", default="bench/reports/default_build.json")
    ap.add_argument("--wall", help="the build's wall time as measured by /usr/bin/time (e.g. 27:41)")
    ap.add_argument("--load-note", default="", help="what else ran on the machine during the build")
    ap.add_argument("--variants-only", action="store_true",
                    help="refresh only the rows of the variants built since (the build's rows, wall and commit stay)")
    args = ap.parse_args()
    from core.data.pipeline import PIPELINE_VERSION

    out = Path(args.out)
    if args.variants_only:  # the variants built after the timed build: their rows only, the build's own kept
        report = json.loads(out.read_text(encoding="utf-8"))
        report.update({"variants": system_rows(args.dataset, variants=True),
                       "variants_command": "python -m bench.default_build_report --variants-only",
                       "variants_commit": head_commit()})
        write_report(out, report)
        return
    rows = system_rows(args.dataset)
    variants = system_rows(args.dataset, variants=True)
    previous = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    have = {r["system"] for r in rows + variants}
    carried = [{**r, "carried_from": r.get("carried_from") or previous.get("variants_commit") or previous.get("commit")}
               for r in previous.get("variants", []) if r["system"] not in have]
    report = {"command": "python -m core build --dataset " + args.dataset + " --all; python -m bench.default_build_report",
              "commit": head_commit(), "machine": platform.platform(), "text_pipeline": PIPELINE_VERSION,
              "wall": args.wall, "load": args.load_note or "not stated", "systems": rows,
              "variants": variants + carried,
              **({"variants_note": "rows with carried_from were built beside the default build of that commit and "
                                   "not rebuilt with this one (python -m bench.default_build_report --variants-only "
                                   "after building them replaces them)"} if carried else {})}
    write_report(out, report)
    for r in rows:
        t = r.get("training") or {}
        print(f"{r['system']:16s} {r['state']:8s} {r['build_seconds'] or 0:7.1f}s  "
              + (f"best dev {t['best_dev']:.4f} vs {t['reference']} {t['reference_dev']:.4f} ({t['stopped']})"
                 if t.get("best_dev") is not None and isinstance(t.get("reference_dev"), (int, float)) else ""))


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
