"""One set of vectorised CPU kernels on every host, so that a seed and a commit give one model.

torch picks its vectorised ATen kernels (softmax, layer norm, activations, reductions...) by the CPU it loads on:
AVX-512 where the host has it, AVX2 otherwise. Their sums round differently in the last bits, and a 600-step
training carries that elsewhere: DenseTrans's dev Recall@100 at step 100 was .9724 on the AVX2 hosts of the
committed builds and .9741 on an AVX-512 host, .9724 again there with the AVX2 kernels (BENCHMARKS.md, "What
``make reproduce`` costs"). ``core`` therefore asks for the AVX2 kernels, the widest every current x86 host has;
torch reads the choice once, when it is imported, so ``core`` is imported first (every entry point does).
MKL's own GEMM dispatch is left alone: pinning it (``MKL_CBWR=AVX2``) changed even an AVX2-class result.
"""
from __future__ import annotations

import os
import sys

PINNED = {"ATEN_CPU_CAPABILITY": "avx2"}  # torch's names: default, avx2, avx512 (x86)


def pin_cpu_kernels() -> None:
    """Ask torch for its AVX2 kernels unless the user chose others (``ATEN_CPU_CAPABILITY``); a no-op once torch
    is loaded (then :func:`cpu_kernels` says what it runs)."""
    if "torch" in sys.modules:
        return
    for key, value in PINNED.items():
        os.environ.setdefault(key, value)


def cpu_kernels() -> str:
    """The vectorised kernels this process's torch runs ("AVX2", "AVX512", "DEFAULT", ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())
