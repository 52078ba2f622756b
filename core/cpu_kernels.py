"""One set of vectorised CPU kernels on every host, so that a seed and a commit give one model.

torch picks its vectorised ATen kernels (softmax, layer norm, activations, reductions...) by the CPU it loads on:
AVX-512 where the host has it, AVX2 otherwise. Their sums round differently in the last bits, and a 600-step
training carries that elsewhere: DenseTrans's dev curve on an AVX-512 host left the committed builds' (made on
AVX2 hosts) and came back to it with the AVX2 kernels; oneDNN, which runs the CNNs' convolutions, likewise
chooses its instructions by host (the TrecQA CNN's best dev MAP moved in the fifth decimal until
``ONEDNN_MAX_CPU_ISA=AVX2``; the figures: docs/reproduce_run.md). ``core`` therefore asks both for AVX2, the widest every current x86 host has; torch reads the choice
when it is imported, so ``core`` is imported first (every entry point does). MKL's own GEMM dispatch is left
alone: pinning it (``MKL_CBWR=AVX2``) changed even an AVX2-class result.
"""
from __future__ import annotations

import os
import sys

PINNED = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised ATen kernels (default, avx2, avx512 on x86)
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's convolutions (the CNN reranker's and SDML-CNN's)
}


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
