"""Shared session-state keys (set on the home page, read by every page)."""
from __future__ import annotations

import os

import streamlit as st

from core.data.datasets import DEFAULT_DATASET

DATASET_KEY = "dataset"


def current_dataset() -> str:
    """The dataset chosen on the home page (``QRS_DATASET`` sets the default)."""
    if DATASET_KEY not in st.session_state:
        st.session_state[DATASET_KEY] = os.environ.get("QRS_DATASET", DEFAULT_DATASET)
    return st.session_state[DATASET_KEY]
