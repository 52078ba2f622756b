"""Each package's ``__all__`` lists what other packages may import from it (its public modules, and the names its
``__init__`` defines for them); every import across packages (core, models, ui, pages, bench, app.py) stays on
that surface, function-level imports included. A module another package needs is added to ``__all__`` on purpose."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("core", "models", "ui", "pages", "bench")


def _modules(root: Path) -> dict[str, Path]:
    files = [f for p in PACKAGES for f in sorted((root / p).rglob("*.py")) if "alembic" not in f.relative_to(root).parts]
    files += [f for f in [root / "app.py"] if f.is_file()]
    out = {}
    for f in files:
        parts = list(f.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def off_surface(root: Path = ROOT) -> list[str]:
    """``file:line package.name`` for every import from another package of a name its ``__all__`` does not list."""
    modules = _modules(root)
    packages = {m for m, f in modules.items() if f.name == "__init__.py"}
    surfaces = {p: _all(modules[p]) for p in packages}
    bad = []
    for name, path in modules.items():
        own = name if name in packages else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names]
                targets = [node.module] if node.module not in packages else targets
            else:
                continue
            for target in targets:
                package, _, public = target.rpartition(".")
                if package not in packages or package == own or own.startswith(package + "."):
                    continue
                if surfaces[package] is None or public not in surfaces[package]:
                    bad.append(f"{path.relative_to(root)}:{node.lineno} {target}")
    return bad


def test_every_package_states_its_surface():
    modules = _modules(ROOT)
    for package in ("core", "core.data", "core.retrieval", "core.rerank", "core.serving", "core.analysis",
                    "core.judging", "core.cli", "models", "ui"):
        listed = _all(modules[package])
        assert listed, f"{package}/__init__.py has no __all__"
        missing = [n for n in listed if f"{package}.{n}" not in modules and n not in
                   modules[package].read_text(encoding="utf-8").split("__all__")[0]]
        assert not missing, f"{package}.__all__ names what does not exist: {missing}"


def test_imports_across_packages_stay_on_the_surface():
    bad = off_surface()
    assert bad == [], "imported from another package but not in its __all__:\n" + "\n".join(bad)


def test_the_check_sees_an_off_surface_import(tmp_path):
    (tmp_path / "core" / "data").mkdir(parents=True)
    (tmp_path / "core" / "__init__.py").write_text('__all__ = ["data"]\n')
    (tmp_path / "core" / "data" / "__init__.py").write_text('__all__ = ["pipeline"]\n')
    (tmp_path / "core" / "data" / "pipeline.py").write_text("")
    (tmp_path / "core" / "data" / "secret.py").write_text("")
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "__init__.py").write_text("")
    (tmp_path / "ui" / "x.py").write_text("def f():\n    from core.data.pipeline import tokens\n    from core.data import secret\n")
    assert off_surface(tmp_path) == ["ui/x.py:3 core.data.secret"]
