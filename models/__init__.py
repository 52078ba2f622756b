"""Torch modules and losses, one file per method, each citing its paper's § and equations (no I/O, no UI)."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "bert", "cnn_reranker", "cross_encoder", "densetrans", "dual_encoder", "frm", "losses", "sdml_cnn"
]
