"""Train/build one first-stage system with its build() and print the measured metrics (JSON).

Usage: QRS_VAR=... python -m bench.first_stage_train densetrans|sdml-cnn|dual-encoder [variant] [--profile quick]
       [--threads 1] [--tag TAG] [--set key=value ...]   (overrides of the config for experiments)
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=["densetrans", "sdml-cnn", "dual-encoder"])
    ap.add_argument("variant", nargs="?")
    ap.add_argument("--variant", dest="variant_option", metavar="VARIANT",
                    help="the variant as an option: --variant=-AllDense (a positional starting with '-' reads as a flag)")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tag")
    ap.add_argument("--set", nargs="*", action="extend", default=[])
    args = ap.parse_args()
    args.variant = args.variant_option or args.variant
    import torch

    torch.set_num_threads(args.threads)
    from core.data.datasets import load_dataset

    if args.system == "densetrans":
        from core.retrieval import densetrans as mod
    elif args.system == "dual-encoder":
        from core.retrieval import dual_encoder as mod
    else:
        from core.retrieval import sdml as mod
    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = json.loads(v) if v[:1] in "0123456789-[{tf" and v not in ("full",) else v
    ds = load_dataset("qqp-bimpm")
    cfg = (mod.make_config(args.profile, **overrides) if args.system == "dual-encoder"
           else mod.make_config(args.profile, args.variant, **overrides))
    t0 = time.perf_counter()
    metrics = mod.build(ds, args.profile, variant=None if args.system == "dual-encoder" else args.variant,
                        config=cfg, tag=args.tag, progress=lambda f, m: print(f"{time.perf_counter() - t0:7.1f}s {m}",
                                                                             file=sys.stderr, flush=True))
    metrics["wall_seconds"] = time.perf_counter() - t0
    metrics["threads"] = args.threads
    print(json.dumps({"system": args.system, "variant": args.variant, "tag": args.tag, "config": overrides,
                      "metrics": metrics}, default=str))


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
