"""The app's pages: titles, icons, URL paths and groups (what a researcher does), for ``st.navigation``.

``app.py`` turns these into ``st.Page`` objects; the home page lists them with ``st.page_link``.
Page files stay runnable on their own (AppTest runs them one by one).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    """One page of the app."""

    path: str  # script, relative to the repository root (also what st.switch_page takes)
    title: str
    icon: str
    url_path: str
    what: str  # one line for the home page
    annotators: bool = False  # open to annotators (blind judging); False: owners and researchers only


HOME = PageSpec("pages/0_Home.py", "Home", ":material/home:", "", "dataset, statistics, systems and build status")
GROUPS: dict[str, list[PageSpec]] = {
    "Explore": [
        PageSpec("pages/1_Compare.py", "Compare", ":material/compare_arrows:", "Compare",
                 "systems side by side on one query: rankings, marks, latency, agreement, fusion"),
        PageSpec("pages/2_Layers.py", "Layers", ":material/layers:", "Layers",
                 "per-layer discriminativeness of BERT and DenseTrans representations, Recall@k"),
        PageSpec("pages/3_Keywords.py", "Keywords", ":material/key:", "Keywords",
                 "FRM keyword importance, multi-level keyword sets, comparable pairs"),
    ],
    "Judge": [
        PageSpec("pages/4_Annotate.py", "Annotate", ":material/rate_review:", "Annotate",
                 "judge pooled, blind results with the keyboard; labels go to SQLite", annotators=True),
        PageSpec("pages/5_Error_Analysis.py", "Error Analysis", ":material/troubleshoot:", "Error_Analysis",
                 "metrics, significance, per-query wins and losses from stored runs"),
        PageSpec("pages/7_Case_Studies.py", "Case Studies", ":material/menu_book:", "Case_Studies",
                 "saved comparisons: reopen, annotate, export"),
        PageSpec("pages/8_Campaigns.py", "Campaigns", ":material/groups:", "Campaigns",
                 "team judging: create, assign, progress, adjudicate, agreement, export"),
    ],
    "Build": [
        PageSpec("pages/6_Models.py", "Models", ":material/model_training:", "Models",
                 "build status, learning curves, untrained references, longer runs"),
    ],
}


def all_pages() -> list[PageSpec]:
    """Home first, then every grouped page."""
    return [HOME] + [p for pages in GROUPS.values() for p in pages]


def visible_pages(identity) -> list[PageSpec]:  # noqa: ANN001 - ui.auth.Identity (imported lazily)
    """The pages ``identity`` may open: all (single-user mode, owners, researchers), the annotators' pages
    (any other logged-in user), or none (not logged in)."""
    if not identity.authenticated:
        return []
    if identity.sees_rankings:
        return all_pages()
    return [p for p in all_pages() if p.annotators]


def page_for(path: str | None) -> PageSpec | None:
    """The page whose script is ``path`` (absolute or relative to the repository root), if any."""
    if not path:
        return None
    from pathlib import Path

    name = Path(path).name
    return next((p for p in all_pages() if Path(p.path).name == name), None)


def ensure_navigation() -> None:
    """Route through ``app.py``'s navigation even when the server's first visit was a deep link.

    Streamlit starts in its legacy pages-directory mode when a ``pages/`` folder exists and only leaves
    it once ``st.navigation`` runs; a first visit to ``/Layers`` after a restart would otherwise run the
    page alone with an ungrouped sidebar (listing the entry as "app"). Each page calls this first: in
    that mode it switches to the app's navigation and reruns the same page. No-op elsewhere (AppTest
    runs a page file alone without the legacy mode).
    """
    import sys

    import streamlit as st
    from streamlit.runtime.pages_manager import PagesManager

    from core.user_systems import refresh_if_changed
    from ui.auth import gate

    refresh_if_changed()  # systems added or removed by `python -m core systems`, or plugins installed, while the app runs

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
    identity = gate()  # with login configured, a visitor who is not logged in gets the login page and nothing else
    spec = page_for(sys._getframe(1).f_globals.get("__file__"))  # the page script that called
    if spec is not None and spec not in visible_pages(identity):
        st.title(spec.title)
        st.info(f"{spec.title} is for the lab's owners and researchers (named in the configuration): it shows "
                "systems' rankings and results. As an annotator you judge blind on the Annotate page.", icon="🔒")
        st.stop()
