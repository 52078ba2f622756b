"""FRM's vector cache shared by builds side by side: each chunk is computed once, by whoever claims it first,
and every process ends with the same vectors as a build alone (core.rerank.frm_features.VectorStore)."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.side_by_side import side_by_side


@dataclass
class _Text:
    text: str
    keywords: tuple[str, ...] = ("k",)


class _Featurizer:
    """Stands in for MiniLM: a text's vectors are a function of the text; records what it computed."""

    def __init__(self, pause: float = 0.0) -> None:
        self.computed: list[str] = []
        self.pause = pause

    def vectors(self, part, progress=None):
        time.sleep(self.pause)
        self.computed += [f.text for f in part]
        cls = np.stack([np.full(384, len(f.text), np.float32) for f in part])
        return cls, [np.full((len(f.keywords), 384), i, np.float32) for i, f in enumerate(part)]


TEXTS = [_Text(f"question number {i}?") for i in range(10)]


def test_two_builds_side_by_side_compute_each_chunk_once(tmp_path):
    from core.rerank.frm_features import VectorStore

    stores, featurizers = [VectorStore(tmp_path), VectorStore(tmp_path)], [_Featurizer(0.2), _Featurizer(0.2)]
    errors = side_by_side(lambda s, f: s.ensure(f, TEXTS, chunk=2), list(zip(stores, featurizers)))
    assert not errors, errors
    first, second = (set(f.computed) for f in featurizers)
    assert first and second and not first & second  # the work was shared, nothing twice
    assert first | second == {t.text for t in TEXTS}
    (tmp_path / "alone").mkdir()
    alone = VectorStore(tmp_path / "alone")
    alone.ensure(_Featurizer(), TEXTS, chunk=2)
    for store in stores:
        assert set(store.cls) == set(alone.cls)
        assert all(np.array_equal(store.cls[t], alone.cls[t]) and np.array_equal(store.kw[t], alone.kw[t])
                   for t in alone.cls)
    assert sorted(p.name for p in tmp_path.glob("chunk-*.npz")) == sorted(p.name for p in (tmp_path / "alone").glob("chunk-*.npz"))
    assert not list(tmp_path.glob(".chunk-*"))  # no lock or temporary file left


def test_the_chunks_do_not_depend_on_what_is_cached_already(tmp_path):
    from core.rerank.frm_features import VectorStore

    VectorStore(tmp_path).ensure(_Featurizer(), TEXTS[:4], chunk=2)
    later = _Featurizer()
    VectorStore(tmp_path).ensure(later, TEXTS, chunk=2)
    assert later.computed == [t.text for t in TEXTS[4:]]
    assert len(list(tmp_path.glob("chunk-*.npz"))) == 5


def test_a_chunk_locked_by_a_process_that_died_is_computed(tmp_path):
    from core.rerank.frm_features import VectorStore

    store = VectorStore(tmp_path)
    name = hashlib.sha1("\x00".join(t.text for t in TEXTS[:2]).encode()).hexdigest()[:16]
    lock = tmp_path / f".chunk-{name}.lock"
    died = subprocess.run([sys.executable, "-c", "import os, sys\nfrom pathlib import Path\n"
                           "from core.artifacts import exclusive_lock\n"
                           "with exclusive_lock(Path(sys.argv[1])) as taken:\n    os._exit(0 if taken else 3)", str(lock)],
                          cwd=str(Path(__file__).parents[1]))
    assert died.returncode == 0 and lock.exists()  # it took the chunk's lock and died holding it
    featurizer = _Featurizer()
    store.ensure(featurizer, TEXTS, chunk=2)
    assert featurizer.computed == [t.text for t in TEXTS] and not lock.exists()
