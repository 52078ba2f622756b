"""The bring-your-own-data fixtures imported in a private artifacts folder: ``tests/fixtures/byod`` holds a BEIR
folder (user/cqa) and a candidate-list TSV (user/answers) made from real QQP and TrecQA rows."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import FIXTURES

__all__ = ["BYOD", "byod"]

BYOD = FIXTURES / "byod"


@pytest.fixture()
def byod(tmp_path, monkeypatch):
    """A private artifacts folder with both fixtures imported; GloVe replaced by a small seeded table of the
    fixtures' words, so the trainers run in seconds."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    import core.data.vectors
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.data.pipeline import tokens
    from core.data.vectors import WordVectors

    assert import_dataset("beir", BYOD / "cqa", "cqa") == "user/cqa"
    assert import_dataset("candidates", BYOD / "answers.tsv", "answers") == "user/answers"
    cqa, answers = load_dataset("user/cqa"), load_dataset("user/answers")
    words = sorted({w for ds in (cqa, answers) for t in [*ds.corpus.values(), *ds.queries.values()]
                    for w in tokens(t)})
    small = WordVectors({w: i for i, w in enumerate(words)},
                        np.random.default_rng(0).normal(size=(len(words), 50)).astype(np.float32))
    monkeypatch.setattr(core.data.vectors, "load_glove_50d", lambda: small)
    return cqa, answers
