"""One definition each: Holm's correction, the randomization test, the pair ROC AUC, the default metrics and
TREC run/qrels text are written once in the code (core, bench, ui, pages, models) and called elsewhere."""
from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

PACKAGES = ("core", "bench", "ui", "pages", "models")
ONCE = {  # a pattern a definition matches -> the one file allowed to hold it
    r"^\s*def holm\(": "core/analysis/significance.py",
    r"^\s*def randomization_test\(": "core/analysis/significance.py",
    r"^\s*def paired_bootstrap_auc\(": "core/analysis/significance.py",
    r"import roc_auc_score": "core/evaluation.py",  # sklearn's AUC behind core.evaluation.roc_auc only
    r"^\s*DEFAULT_METRICS\s*=": "core/evaluation.py",
    r"Q0 \{": "core/data/trec.py",  # a TREC run line written
    r"\} 0 \{": "core/data/trec.py",  # a TREC qrels line written
    r"expected 6 columns": "core/data/trec.py",  # a TREC run line parsed
    r"expected 'qid 0 docid label'": "core/data/trec.py",  # a TREC qrels line parsed
}


def _sources() -> dict[str, str]:
    files = [f for pkg in PACKAGES for f in sorted((ROOT / pkg).rglob("*.py")) if "alembic" not in f.parts]
    files += [ROOT / "app.py"] if (ROOT / "app.py").is_file() else []
    return {f.relative_to(ROOT).as_posix(): f.read_text(encoding="utf-8") for f in files}


def where(pattern: str, sources: dict[str, str]) -> list[str]:
    """``file:line`` of every line matching ``pattern``."""
    rx = re.compile(pattern)
    return [f"{name}:{n}" for name, text in sources.items() for n, line in enumerate(text.splitlines(), 1) if rx.search(line)]


@pytest.mark.parametrize("pattern", list(ONCE))
def test_defined_once(pattern):
    found = where(pattern, _sources())
    owner = ONCE[pattern]
    assert found and all(f.startswith(owner + ":") for f in found), f"{pattern!r} outside {owner}: {found}"
    if pattern.startswith("^"):
        assert len(found) == 1, found


def test_the_scan_finds_a_second_definition():
    sources = {"core/analysis/significance.py": "def holm(p):\n", "bench/runner.py": "x = 1\ndef holm(pvalues):\n"}
    assert where(r"^\s*def holm\(", sources) == ["core/analysis/significance.py:1", "bench/runner.py:2"]
