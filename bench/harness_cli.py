"""``python -m bench harness`` (``make bench``): the speed and memory harness; writes bench/results.json and bench/results.md.

Sections (``--only a,b``): machine, latency, compare, bm25, encode, builds, ann, coldstart,
first_view (Error Analysis's default first view from a fresh process), ab (today's code against this
checkout, in one run: ``--baseline`` names a worktree of today's code); memory is recorded after every
section (peak RSS of this process). ``--quick`` is a smoke run: fewer queries, the 100k synthetic
collection only. Not part of the test suite.

    python -m bench harness                      # everything (≈ 15–30 min on 2 cores; rank-bm25 on 1M dominates)
    python -m bench harness --quick              # a few minutes
    python -m bench harness --only bm25,latency  # some sections
    git worktree add /tmp/base-bench 551c626 && python -m bench harness --only ab,first_view --baseline /tmp/base-bench
    # the base tree reading the artifacts its own build wrote (QRS_VAR=/tmp/basevar python -m core build ...):
    python -m bench harness --only ab --baseline /tmp/base-bench --baseline-var /tmp/basevar
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

# OpenMP threads that sleep instead of spinning: torch and faiss each have a pool, and on a shared
# machine spinning pools steal the cores the other one needs.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent

SECTIONS = ("latency", "compare", "bm25", "encode", "builds", "ann", "coldstart", "first_view", "ab")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench harness", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    p.add_argument("--quick", action="store_true", help="a fast smoke run (small samples, 100k synthetic only)")
    p.add_argument("--dataset", default="qqp-bimpm")
    p.add_argument("--out", default=str(HERE), help="folder for results.json and results.md")
    p.add_argument("--baseline", help="a worktree of today's code for the 'ab' section (git worktree add ...)")
    p.add_argument("--baseline-var", help="the artifacts folder the baseline tree's own build wrote (QRS_VAR for its side)")
    p.add_argument("--keep", action="store_true",
                   help="keep the other sections of the existing results.json (marked with their own run's date)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    import core  # noqa: F401  (offline guards)
    from bench import harness as h
    from bench import harness_bm25, harness_fresh
    from bench.measure import current_rss_mb, machine, peak_rss_mb
    from core.data.datasets import load_dataset

    only = [x for x in (args.only or "").split(",") if x] or list(SECTIONS)
    unknown = set(only) - set(SECTIONS)
    if unknown:
        print(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    settings = h.Settings(quick=args.quick, dataset=args.dataset)
    results: dict = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "quick": args.quick,
                     "dataset": args.dataset, "command": "python -m bench harness " + " ".join(argv or sys.argv[1:]),
                     "machine": machine(), "sections": {}, "memory": {}}
    if args.keep and (Path(args.out) / "results.json").is_file():
        old = json.loads((Path(args.out) / "results.json").read_text(encoding="utf-8"))
        for name, section in old.get("sections", {}).items():
            if name not in only:
                section.setdefault("from_run", f"{old.get('started')} ({old.get('command', '').strip()})")
                results["sections"][name] = section
                memory = old.get("memory")
                if isinstance(memory, dict) and isinstance(memory.get(name), dict):
                    results["memory"][name] = memory[name]
    ds = load_dataset(args.dataset)
    load = h.Loader(ds)
    runners = {
        "latency": lambda: h.section_latency(settings, ds, load),
        "compare": lambda: h.section_compare(settings, ds, load),
        "bm25": lambda: harness_bm25.section_bm25(settings, ds),
        "encode": lambda: h.section_encode(settings, ds),
        "builds": lambda: h.section_builds(settings, ds),
        "ann": lambda: h.section_ann(settings, ds, load),
        "coldstart": lambda: harness_fresh.section_coldstart(settings, ds),
        "first_view": lambda: harness_fresh.section_first_view(settings, ds),
        "ab": lambda: harness_fresh.section_ab(settings, ds, args.baseline, args.baseline_var) if args.baseline else
        {"skipped": "no --baseline worktree given"},
    }
    for name in [s for s in SECTIONS if s in only]:
        print(f"[bench] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            results["sections"][name] = runners[name]()
        except Exception as exc:  # one broken section must not lose the others
            results["sections"][name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        results["sections"][name]["section_seconds"] = round(time.perf_counter() - t0, 1)
        results["memory"][name] = {"peak_rss_mb": peak_rss_mb(), "rss_mb": current_rss_mb()}
        write(results, Path(args.out))  # after every section: a crash later loses nothing
        print(f"[bench] {name}: {results['sections'][name]['section_seconds']}s, peak RSS "
              f"{results['memory'][name]['peak_rss_mb']} MB", flush=True)
    results["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    results["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out = write(results, Path(args.out))
    print(f"[bench] wrote {out / 'results.json'} and {out / 'results.md'}")
    return 0


def write(results: dict, out: Path) -> Path:
    from bench.harness_report import to_markdown

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n",
                                      encoding="utf-8")
    (out / "results.md").write_text(to_markdown(results), encoding="utf-8")
    return out


