"""Question Retrieval Studio — the entry point (``streamlit run app.py``): named, grouped navigation.

Pages are listed in ``ui/nav.py`` (Home; Explore: Compare, Layers, Keywords; Judge: Annotate, Error
Analysis, Case Studies; Build: Models). Each page file also runs alone (AppTest).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import core  # noqa: F401  (offline guards)
from ui.nav import GROUPS, HOME, PageSpec

st.set_page_config(page_title="Question Retrieval Studio", page_icon="🔎", layout="wide")

ROOT = Path(__file__).resolve().parent


def _page(spec: PageSpec, default: bool = False):
    return st.Page(spec.path, title=spec.title, icon=spec.icon, url_path=spec.url_path or None,
                   default=default)


navigation = {"": [_page(HOME, default=True)]}
for group, pages in GROUPS.items():
    navigation[group] = [_page(p) for p in pages if (ROOT / p.path).exists()]
st.navigation(navigation).run()
