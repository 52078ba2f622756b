"""A system's ``paper`` profile with its patience counted after the warm-up: the profile's patience plus the
evaluations that fall inside the warm-up (10 % of the step cap); every other setting is the paper profile's.
Prints each dev evaluation as it comes (the run may be cut by the device's time limit).

    python -m bench.device.patience_after_warmup densetrans|dual-encoder
"""
from __future__ import annotations

import json
import math
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from core.data.datasets import load_dataset

    system = (argv or sys.argv[1:])[0]
    if system == "densetrans":
        from core.retrieval.densetrans import build, make_config
    elif system == "dual-encoder":
        from core.retrieval.dual_encoder import build, make_config
    else:
        print(f"error: densetrans or dual-encoder, got {system!r}", file=sys.stderr)
        return 2
    plan = make_config("paper").plan
    warmup_steps = int(plan.max_steps * plan.warmup_fraction)
    cfg = make_config("paper", patience=plan.patience + math.ceil(warmup_steps / plan.eval_every))
    print(json.dumps({"system": system, "patience": cfg.plan.patience, "warmup_steps": warmup_steps}), flush=True)
    start = time.time()

    def progress(fraction: float, message: str) -> None:  # noqa: ARG001
        if "dev" in message:
            print(f"{time.time() - start:7.1f}s {message}", flush=True)

    out = build(load_dataset("qqp-bimpm"), "paper", progress=progress, config=cfg, tag="warmup-patience")
    print(json.dumps({k: out.get(k) for k in ("test", "steps", "train_seconds")}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
