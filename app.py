"""Question Retrieval Studio — the entry point (``streamlit run app.py``): named, grouped navigation.

Pages are listed in ``ui/nav.py`` (Home; Explore: Compare, Layers, Keywords; Judge: Annotate, Error
Analysis, Case Studies; Build: Models). Each page file also runs alone (AppTest).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import core  # noqa: F401  (offline guards)
from core.errors import StudioError
from ui.auth import gate
from ui.cache import dataset, warm_evaluation
from ui.nav import GROUPS, HOME, PageSpec, visible_pages
from ui.state import current_dataset

st.set_page_config(page_title="Question Retrieval Studio", page_icon="🔎", layout="wide")

ROOT = Path(__file__).resolve().parent
identity = gate(show_user=True)  # login configured and nobody logged in: the login page, no page names (ui/auth.py)
allowed = [p for p in visible_pages(identity) if (ROOT / p.path).exists()]  # annotators: Annotate only (ui/nav.py)
first = HOME if HOME in allowed else allowed[0]


def _page(spec: PageSpec):
    return st.Page(spec.path, title=spec.title, icon=spec.icon, url_path=spec.url_path or None,
                   default=spec == first)


navigation = {"": [_page(HOME)]} if HOME in allowed else {}
for group, pages in GROUPS.items():
    if shown := [_page(p) for p in pages if p in allowed]:
        navigation[group] = shown
page = st.navigation(navigation)
try:  # once per server process: compile ranx's numba code in the background (Error Analysis's first view)
    ds = dataset(current_dataset())
    warm_evaluation(tuple(list(ds.queries)[:2] + list(ds.corpus)[:3]))
except StudioError:
    pass  # the page shows why the dataset cannot be loaded
page.run()
