"""How the benchmarks measure: warm timings as percentiles, resident memory, and the machine a figure came from.

Every bench report that states a time says where it was taken (``machine()``: cores, RAM, CPU model,
torch threads, the load average at the start) and how (``timed``: warm-up calls first, then repeats).
"""
from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np

__all__ = ["current_rss_mb", "machine", "peak_rss_mb", "percentiles", "timed"]


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in seconds)
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "mean_ms": round(statistics.fmean(ms), 3)}


def timed(fn: Callable[[], object], repeats: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (``getrusage``; Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def current_rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return float("nan")


def machine() -> dict:
    import torch

    import bm25s
    import faiss
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_gb": _ram_gb(),
        "torch_threads": torch.get_num_threads(),
        "cuda": bool(torch.cuda.is_available()),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "versions": {"torch": torch.__version__, "bm25s": bm25s.__version__, "faiss": faiss.__version__,
                     "numpy": np.__version__},
        "platform": platform.platform(),
    }

