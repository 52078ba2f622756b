"""Streamlit helpers and caches for the pages.

Importing ``core`` first pins torch's CPU kernels before any page loads torch (``core.cpu_kernels``).
"""
import core  # noqa: F401
