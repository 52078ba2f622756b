"""Streamlit helpers and caches for the pages.

Importing ``core`` first pins torch's CPU kernels before any page loads torch (``core.cpu_kernels``).
"""
import core  # noqa: F401

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "auth", "background_loads", "budget_view", "cache", "campaign_judge", "charts", "compare_view", "explain_view", "judging_panel", "keys", "label_scopes", "nav",
    "ppi_view", "render", "state", "system_picker"
]
