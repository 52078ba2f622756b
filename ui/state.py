"""Shared session-state keys (set on the home page, read by every page)."""
from __future__ import annotations


import streamlit as st

from core.data.datasets import DEFAULT_DATASET
from core.settings import settings

DATASET_KEY = "dataset"


def current_dataset() -> str:
    """The dataset chosen on the home page (``QRS_DATASET`` sets the default)."""
    if DATASET_KEY not in st.session_state:
        st.session_state[DATASET_KEY] = settings().dataset or DEFAULT_DATASET
    return st.session_state[DATASET_KEY]
