"""Second-stage rerankers (CNN, FRM, cross-encoder, bi-encoder, tree cross) and their trainers."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "cnn", "frm", "frm_features", "frm_training", "interpolation"
]
