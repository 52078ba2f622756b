"""What the judgment-store tests share: the store on each backend (``db_url``: SQLite and a real PostgreSQL) and one
label written the usual way."""
from __future__ import annotations

import pytest

from core.judging.judgments import JudgmentStore
from core.judging.label_records import LabelResult

__all__ = ["DS", "label_one", "store"]

DS = "toy"


@pytest.fixture
def store(db_url: str) -> JudgmentStore:
    """A judgment store on the backend of ``db_url``, closed after the test."""
    s = JudgmentStore(db_url)
    yield s
    s.close()


def label_one(store: JudgmentStore, label: int, annotator: str = "alice", doc: str = "d1", **kw) -> LabelResult:
    """``label`` on (q1 "How do I learn Python?", ``doc``) by ``annotator``."""
    return store.set_label(annotator, DS, "How do I learn Python?", doc, f"text of {doc}", label, query_id="q1", **kw)
