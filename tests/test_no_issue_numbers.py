"""Code comments, docstrings and user-visible strings say what, not when: no issue numbers in the shipped code."""
from __future__ import annotations

import re

from tests.conftest import ROOT

PATTERN = re.compile(r"issue[ s]*[0-9]+", re.IGNORECASE)


def test_no_issue_numbers_in_core_ui_pages_models_or_the_app():
    files = [ROOT / "app.py", *[f for d in ("core", "ui", "pages", "models") for f in sorted((ROOT / d).rglob("*.py"))]]
    hits = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}" for f in files
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if PATTERN.search(line)]
    assert len(files) > 100
    assert hits == [], "\n".join(hits)


def test_the_pattern_catches_the_forms_that_were_there():
    for text in ("(issue 19)", "issue 12 reference", "issue 20 item 4", "issue 22's parity", "Issues 6"):
        assert PATTERN.search(text), text
    assert not PATTERN.search("a known issue with ties")
