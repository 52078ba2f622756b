"""Datasets, imports, candidate lists, text forms, tokenizers, word vectors, negatives, overlap features."""
