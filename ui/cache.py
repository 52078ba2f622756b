"""The only Streamlit cache loaders: datasets, systems, engines are loaded once per process.

Pages call these; everything they return comes from ``core``. Unhashable arguments are prefixed ``_``.
"""
from __future__ import annotations

import streamlit as st

from core.data import Dataset, load_dataset


@st.cache_resource(show_spinner="Loading dataset…")
def dataset(name: str) -> Dataset:
    return load_dataset(name)


@st.cache_resource(show_spinner="Loading model…", max_entries=64)
def system(name: str, dataset_name: str, variant: str | None = None, options: tuple = ()):
    """A loaded retriever/reranker (``options`` is a tuple of (key, value) pairs, hashable)."""
    from core.registry import load_system

    return load_system(name, dataset(dataset_name), variant=variant, **dict(options))
