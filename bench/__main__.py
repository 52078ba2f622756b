"""``python -m bench``: the declared experiments and the speed harness.

    python -m bench list                      # every declared experiment (bench/experiments.py)
    python -m bench run NAME [--build]        # run one: rankings from core.serving, numbers from evaluate_contract
    python -m bench run NAME --dataset D --split S --out PATH   # the same experiment on other data (tests: fixtures)
    python -m bench harness [--quick] [--only ...]               # speed and memory sections (bench/harness_cli.py)
"""
from __future__ import annotations

import argparse
import os
import sys

# OpenMP threads that sleep instead of spinning: on a shared machine spinning pools steal the cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description="Declared experiments and the speed harness.")
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("list", help="name every declared experiment")
    run = sub.add_parser("run", help="run one declared experiment and write its report")
    run.add_argument("name")
    run.add_argument("--dataset", help="another dataset than the experiment's (e.g. a fixture)")
    run.add_argument("--split", help="another query split than the experiment's")
    run.add_argument("--build", action="store_true", help="build trained systems that are not built yet (quick profile)")
    run.add_argument("--out", help="report path (default bench/reports/<experiment report>)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["harness"]:
        from bench.harness_cli import main as harness_main

        return harness_main(argv[1:])
    args = parse(argv)
    import core  # noqa: F401  (offline guards)
    from bench.experiments import EXPERIMENTS, get_experiment
    from core.errors import StudioError

    if args.verb == "list":
        for exp in EXPERIMENTS:
            print(f"{exp.name:<20} {exp.dataset}/{exp.split}: {', '.join(exp.systems)}  [{', '.join(exp.measures)}; "
                  f"{exp.test} test, Holm]  {exp.title}")
        return 0
    from bench.runner import run_experiment

    try:
        exp = get_experiment(args.name)
        run_experiment(exp, dataset=args.dataset, split=args.split, build=args.build, out=args.out,
                       command="python -m bench " + " ".join(argv))
    except StudioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
