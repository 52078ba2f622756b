"""The modules of ``core`` form layers that import one way, function-level imports included.

Walks every module of core (and models/) with ``ast`` and fails on
- an import circle between modules,
- an upward import: a module importing a unit of its own layer other than its own unit, or any higher layer, and
- a private name (``_name``) imported from another package (core, models, ui, pages, bench, app.py walked).
An import by name (``importlib.import_module("core.x")``, or of a module-level constant holding it) counts as
an import; no edge is exempt.

The order is written down once, in ``LAYERS`` below (lowest first); DEVELOPERS.md points here. A unit is a
module-name prefix: ``core.data`` covers every module of that package. A module belongs to the unit with the
longest matching prefix (``core`` itself names only the package's ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

LAYERS: tuple[tuple[str, ...], ...] = (
    ("core.errors", "core.progress"),  # exceptions and describe_error; the progress-callback type
    ("core.settings",),  # every QRS_* environment variable, typed, read in one place
    ("core.paths", "core.offline", "core.cpu_kernels"),  # repository and artifact folders; offline mode for hub
    # libraries; the CPU kernels torch is asked for (all three set up by the package's __init__)
    ("core",),  # the package itself (its __init__ switches offline mode on)
    ("core.artifacts",),  # atomic JSON / torch writes, fingerprints
    ("core.executor",),  # the one executor of heavy work (Ray, embedded or a cluster)
    ("models",),  # torch modules citing the papers' equations: no core import at all
    ("core.data",),  # datasets, text pipeline, tokenizers, vectors, candidate lists: no retrieval, no serving
    ("core.retrieval.base",),  # Retriever / Reranker protocols, Ranking, to_run
    ("core.evaluation",),  # ranx wrappers, metric names, the tie order, TREC run IO, pair AUC: trainers' dev metric too
    ("core.evaluation_contract",),  # the evaluation contract: query set, both conventions, trec_eval names
    ("core.system_spec",),  # what a system is: SystemSpec, Recipe, the SystemProvider protocol and its checks
    ("core.systems",),  # the built-in systems' registrations, one light module each (no system code imported)
    ("core.plugins", "core.user_systems_file"),  # qrs.systems plugins as installed now; the user systems file
    ("core.registry",),  # systems by name: discovery, providers, names people read, folders
    ("core.build_status",),  # where the background build stands (its status files and lock), read-only
    ("core.transfer",),  # a trained model applied to another dataset: which folder serves a name
    ("core.training",),  # the training loop, seeds, checkpoints, early stopping
    ("core.retrieval",),  # first-stage retrievers and their trainers
    ("core.training_data",),  # the labelled-pairs view every reranker trainer reads
    ("core.rerank",),  # second-stage rerankers and their trainers
    ("core.user_systems",),  # adding, removing and checking a researcher's model folders and run files
    ("core.serving",),  # the one loader and the one runner; scorers of candidate lists
    ("core.analysis",),  # Compare engine, stored runs, error analysis, layers, keywords, held-out verdicts
    ("core.judging",),  # judgments store, pooling, campaigns, agreement, case studies
    ("core.build_graph",),  # the build as executor jobs, edges from the registrations
    ("core.build",),  # build every registered system (its jobs on the executor)
    ("core.build_plan",),  # what the default build would do now: ready, missing, about how long
    ("core.model_cards",),  # what the Models page shows about each system
    ("core.system_notes",),  # every note shown beside a system's numbers (the CLI and the pages)
    ("core.cli",),  # one function per verb
    ("core.__main__",),
)


def _units() -> dict[str, int]:
    return {unit: rank for rank, group in enumerate(LAYERS) for unit in group}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "models").glob("*.py"))
    return {_module_name(f): f for f in files if "alembic" not in f.relative_to(ROOT).parts}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, int]]:
    """(imported module of core or models, line) for every import statement anywhere in the file."""

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[tuple[str, int]] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _by_name(node, _constants(tree)):
            target = _by_name(node, _constants(tree))
            resolved = resolve(target) if target.split(".")[0] in ("core", "models") else None
            if resolved and resolved != name:
                found.add((resolved, node.lineno))
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names] or [base]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in ("core", "models"):
                resolved = resolve(target)
                if resolved and resolved != name:
                    found.add((resolved, node.lineno))
    return found


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments."""
    return {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for t in node.targets if isinstance(t, ast.Name)}


def _by_name(call: ast.Call, constants: dict[str, str]) -> str | None:
    """The module an ``importlib.import_module(...)`` / ``__import__(...)`` call names, when it is written down."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return constants.get(arg.id) if isinstance(arg, ast.Name) else None


def _graph() -> dict[str, set[tuple[str, int]]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _unit(name: str, units: dict[str, int]) -> str:
    candidates = [u for u in units if name == u or (u != "core" and name.startswith(u + "."))]
    assert candidates, f"{name} is in no layer: add it to LAYERS in tests/test_layers_imports.py"
    return max(candidates, key=len)


def upward_imports() -> list[str]:
    """Every edge that points to a higher layer, or sideways to another unit of the same layer."""
    units = _units()
    bad = []
    for name, edges in sorted(_graph().items()):
        unit = _unit(name, units)
        for target, line in sorted(edges):
            other = _unit(target, units)
            if other != unit and units[other] >= units[unit]:
                bad.append(f"{name}:{line} -> {target}  ({unit} may not import {other})")
    return bad


def import_circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {name: {t for t, _ in edges} for name, edges in _graph().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def private_imports(root: Path | None = None) -> list[str]:
    """``file:line module._name`` for every private name imported from another package of the project, function-level
    imports included (a package's own modules may share private names; third-party libraries are not checked)."""
    root = ROOT if root is None else root
    files = [f for pkg in ("core", "models", "ui", "pages", "bench") for f in sorted((root / pkg).rglob("*.py"))
             if "alembic" not in f.relative_to(root).parts] + [f for f in [root / "app.py"] if f.is_file()]
    modules = {".".join(_parts(f, root)): f for f in files}
    bad = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *([base] if base else [])])
            if base.split(".")[0] not in ("core", "models", "ui", "pages", "bench"):
                continue
            target = base if base in modules and modules[base].name == "__init__.py" else base.rpartition(".")[0]
            bad += [f"{path.relative_to(root)}:{node.lineno} {base}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__") and target != package]
    return bad


def _parts(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def test_no_private_name_is_imported_across_packages():
    bad = private_imports()
    assert bad == [], "private names imported from another package (make them public):\n" + "\n".join(bad)


def test_the_registry_reaches_user_and_plugin_systems_downward():
    """Discovery of user and plugin systems is below the registry (no circle through core.user_systems): the
    registry imports the user systems file and the plugins, and neither imports the registry."""
    graph = {name: {t for t, _ in edges} for name, edges in _graph().items()}
    assert {"core.user_systems_file", "core.plugins", "core.systems"} <= graph["core.registry"]
    assert "core.user_systems" not in graph["core.registry"]
    assert not {"core.registry", "core.user_systems"} & (graph["core.user_systems_file"] | graph["core.plugins"])


def test_every_module_of_core_has_a_layer():
    units = _units()
    modules = _modules()
    assert len(modules) > 70  # the walk sees the whole package, not a sample
    for name in modules:
        _unit(name, units)


def test_no_module_imports_upward():
    bad = upward_imports()
    assert bad == [], "upward or sideways imports:\n" + "\n".join(bad)


def test_no_import_circle():
    circles = import_circles()
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_checks_catch_what_they_claim(tmp_path, monkeypatch):
    """The walker sees function-level and relative imports, and the circle finder finds a 2-cycle."""
    pkg = tmp_path / "core" / "data"
    pkg.mkdir(parents=True)
    (tmp_path / "core" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from core.serving import runner\n    from . import b\n"
                              "    from core.serving.runner import _private\n")
    (pkg / "c.py").write_text("import importlib\nNAME = 'core.serving.runner'\n\ndef g():\n"
                              "    return importlib.import_module(NAME)\n")
    (pkg / "b.py").write_text("from core.data.a import f\n")
    (tmp_path / "core" / "serving").mkdir()
    (tmp_path / "core" / "serving" / "__init__.py").write_text("")
    (tmp_path / "core" / "serving" / "runner.py").write_text("")
    (tmp_path / "models").mkdir()
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert any("core.data.a:2 -> core.serving.runner" in line for line in upward_imports())
    assert import_circles() == [["core.data.a", "core.data.b"]]
    assert any("core.data.c:5 -> core.serving.runner" in line for line in upward_imports())
    assert private_imports(tmp_path) == ["core/data/a.py:4 core.serving.runner._private"]


def test_the_runner_loads_through_the_loader():
    """One path from a system name to a ranking: core.serving.runner imports core.serving.loader."""
    assert "core.serving.loader" in {target for target, _line in _graph()["core.serving.runner"]}
