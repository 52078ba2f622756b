"""Datasets, imports, text forms, tokenizers, word vectors, keyword features, overlap features."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "cells", "clusters", "dataset_model", "datasets", "final_test", "imports", "keywords", "loaders", "overlap",
    "pipeline", "readers", "text",
    "tokenizers", "trec", "vectors"
]
