"""Build tree-search-BERT systems on QQP and print their build metrics (timing measured under shared load).

Usage: QRS_VAR=var .venv/bin/python bench/tree_build.py minilm:mean tree-bert cross-encoder ...
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.data.datasets import load_dataset
from core.registry import system_module


def main(args: list[str]) -> None:
    dataset = load_dataset("qqp-bimpm")
    profile = "quick"
    for arg in args:
        if arg.startswith("--profile="):
            profile = arg.split("=", 1)[1]
            continue
        name, _, variant = arg.partition(":")
        t0 = time.perf_counter()
        last = [0.0]

        def progress(f: float, m: str) -> None:
            if time.perf_counter() - last[0] > 10 or f >= 1.0:
                last[0] = time.perf_counter()
                print(f"  [{f:5.1%}] {m}", flush=True)

        metrics = system_module(name).build(dataset, profile=profile, progress=progress, variant=variant or None)
        print(json.dumps({"system": name, "variant": variant or None, "profile": profile,
                          "wall_seconds": round(time.perf_counter() - t0, 1), **metrics}, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
