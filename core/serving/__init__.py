"""Serving: the one loader (system name -> system) and the one runner (system + query -> ranking)."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "candidates", "interpolation_weight", "loader", "pair_scoring", "runner"
]
