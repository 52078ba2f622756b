"""Datasets, imports, text forms, tokenizers, word vectors, keyword features, overlap features."""
