"""Benchmarks and the experiments behind BENCHMARKS.md (``python -m bench list``).

Importing ``core`` first pins torch's CPU kernels before any bench module loads torch (``core.cpu_kernels``).
"""
import core  # noqa: F401
