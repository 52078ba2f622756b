"""Serve the app with the judging panel's commit endpoint: ``streamlit run serve.py`` (what ``make run`` does).

``app.py`` stays the Streamlit script (``streamlit run app.py`` still works: the panel then sends labels
through the component's value only); this file is the ASGI app around it, ``st.App`` with one more route
(``ui.label_endpoint``), so labels are committed without waiting for a script run.
"""
from __future__ import annotations

import streamlit as st

from ui.label_endpoint import routes

app = st.App("app.py", routes=routes())
