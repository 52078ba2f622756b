"""Datasets, imports, text forms, tokenizers, word vectors, keyword features, overlap features."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "datasets", "imports", "keywords", "overlap", "pipeline", "text", "tokenizers", "trec", "vectors"
]
