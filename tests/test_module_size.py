"""One concept per file: no module of core, ui, pages, models, bench or tests is past 400 lines (a longer one is two
concepts)."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

MAX_LINES = 400
PACKAGES = ("core", "ui", "pages", "models", "bench", "tests")


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` for every Python file under the packages of ``root`` longer than ``limit``."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_module_is_past_400_lines():
    assert too_long(ROOT) == []


def test_the_check_finds_a_long_module(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "core" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert too_long(tmp_path) == [f"{Path('core', 'long.py')}: {MAX_LINES + 1} lines"]
