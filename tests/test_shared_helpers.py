"""What test modules share lives in helper modules: no test module imports another test module (its helpers
and fixtures would run with it and change with it); tests/*.py and tests/e2e/*.py alike."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT


def imports_of_test_modules(root: Path) -> list[str]:
    """``path:line -> module`` for every import of a test module (``test_*``) under ``root/tests``."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("tests.") and any(part.startswith("test_") for part in name.split(".")[1:]):
                    found.append(f"{path.relative_to(root)}:{node.lineno} -> {name}")
                    break
    return found


def test_no_test_module_imports_another():
    assert imports_of_test_modules(ROOT) == []


def test_the_check_finds_each_way_of_importing_a_test_module(tmp_path):
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "helper.py").write_text("from tests.conftest import ROOT\n", encoding="utf-8")
    (tmp_path / "tests" / "test_a.py").write_text("from tests.test_b import helper\n", encoding="utf-8")
    (tmp_path / "tests" / "e2e" / "test_c.py").write_text(
        "def f():\n    from tests.e2e import test_d\n    import tests.test_b\n", encoding="utf-8")
    c = Path("tests", "e2e", "test_c.py")
    assert imports_of_test_modules(tmp_path) == [f"{c}:2 -> tests.e2e.test_d", f"{c}:3 -> tests.test_b",
                                                 f"{Path('tests', 'test_a.py')}:1 -> tests.test_b"]
