"""Question Retrieval Studio — the entry point (``streamlit run app.py``): named, grouped navigation.

Pages are listed in ``ui/nav.py`` (Home; Explore: Compare, Layers, Keywords; Judge: Annotate, Error
Analysis, Case Studies; Build: Models). Each page file also runs alone (AppTest).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import core  # noqa: F401  (offline guards)
from core.errors import StudioError
from ui.auth import current_identity, gate
from ui.cache import warm_evaluation
from ui.nav import GROUPS, HOME, PageSpec, all_pages, visible_pages
from ui.state import current_dataset

st.set_page_config(page_title="Question Retrieval Studio", page_icon="🔎", layout="wide")

ROOT = Path(__file__).resolve().parent


def _page(spec: PageSpec, default: bool = False):
    return st.Page(spec.path, title=spec.title, icon=spec.icon, url_path=spec.url_path or None, default=default)


def _start() -> None:
    """The entry of a navigation without Home (annotators): their first page, so that /Annotate stays its URL
    (Streamlit serves the default page only at /)."""
    st.switch_page(first.path)


if not current_identity().authenticated:  # every URL is known (no "page not found"), no page name is listed
    st.navigation([_page(p, p == HOME) for p in all_pages() if (ROOT / p.path).exists()], position="hidden")
identity = gate(show_user=True)  # login configured and nobody logged in: the login page and nothing else
allowed = [p for p in visible_pages(identity) if (ROOT / p.path).exists()]  # annotators: Annotate only (ui/nav.py)
first = HOME if HOME in allowed else allowed[0]
navigation = ({"": [_page(HOME, True)]} if HOME in allowed else
              {"": [st.Page(_start, title=first.title, url_path="start", default=True, visibility="hidden")]})
for group, pages in GROUPS.items():
    if shown := [_page(p) for p in pages if p in allowed]:
        navigation[group] = shown
page = st.navigation(navigation)
try:
    page.run()
finally:  # once per server process, after the first page has drawn (it does not compete with it): compile ranx's
    try:  # numba code in the background, for the first metrics a page shows (Error Analysis, Compare)
        warm_evaluation(current_dataset())
    except StudioError:
        pass  # the page shows why the dataset cannot be loaded
