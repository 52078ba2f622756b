"""Systems register themselves: every built-in system module exports its ``REGISTRATION`` (read from its light module
in ``core.systems``, listed in its ``order``), every provider passes the ``SystemProvider`` check when it is
registered or loaded, a module that is not a system is refused in one line, and a new module becomes a system the
registry lists, the CLI shows and the runner ranks with, as DEVELOPERS.md "Add a system" says, without editing a list.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from core import registry
from core.registry import RegistrationError, SystemSpec
from tests.conftest import ROOT, run_main

# the order the pages list the built-in systems in (cheapest first); kept by each registration's ``order``
LISTED = ("bm25", "minilm", "glove-mean", "dual-encoder", "tree-bert", "densetrans", "sdml-cnn", "fusion",
          "minilm-pairs", "frm", "cnn-rerank", "cross-encoder", "tree-bert-cross")


def built_ins() -> list[SystemSpec]:
    return [s for s in registry.list_systems() if s.origin == "built-in"]


def test_built_ins_are_listed_in_their_registrations_order():
    assert tuple(s.name for s in built_ins()) == LISTED
    orders = [s.order for s in built_ins()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_every_built_in_module_exports_its_registration_and_passes_the_protocol():
    for spec in built_ins():
        provider = registry.system_module(spec.name)
        assert provider.REGISTRATION is spec, spec.name
        assert isinstance(provider, registry.SystemProvider) and registry.check_provider(spec.module, provider)


def test_the_registry_keeps_no_list_and_no_prose_of_systems():
    tree = ast.parse((ROOT / "core" / "registry.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "SystemSpec"]
    assert calls == [] and not hasattr(registry, "SYSTEMS")
    quoted = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not quoted & set(LISTED), "system names typed in the registry"


def test_listing_systems_imports_no_system_code():
    """The registrations are light modules: listing every system imports none of the systems' code (torch, faiss)."""
    code = ("import sys, core.registry as r; r.list_systems(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'faiss', 'bm25s', 'transformers') "
            "or m.startswith(('core.retrieval.', 'core.rerank.'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("", encoding="utf-8")
    for module, source in modules.items():
        (root / name / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


@pytest.fixture
def on_path(tmp_path):
    """A folder put on ``sys.path`` for the test's own packages (removed, with what was imported from it, after)."""
    sys.path.insert(0, str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)
    registry.refresh()


SPEC = 'from core.registry import SystemSpec\nREGISTRATION = SystemSpec("{name}", "retriever", "T", "{module}", "none")\n'
FUNCTIONS = "def build(dataset, profile='quick', progress=None, variant=None):\n    return {}\n\n" \
            "def is_built(dataset, variant=None):\n    return True\n"


def test_a_module_that_is_not_a_system_is_refused_in_one_line(on_path):
    from core.plugins import plugin_registrations
    from core.systems import scan

    package = _package(on_path, "toy_broken", {"not_a_spec": "REGISTRATION = {'name': 'x'}\n"})
    with pytest.raises(RegistrationError) as caught:
        scan(package)
    assert str(caught.value) == "toy_broken.not_a_spec: REGISTRATION is a dict, not a core.registry.SystemSpec"

    package = _package(on_path, "toy_noload", {"half": SPEC.format(name="half", module="toy_noload.half") + FUNCTIONS})
    module = __import__(f"{package}.half", fromlist=["half"])
    with pytest.raises(RegistrationError) as caught:
        plugin_registrations(module, "toy_noload.half")
    line = str(caught.value)
    assert line.startswith("toy_noload.half: no load (") and "\n" not in line
    with pytest.raises(RegistrationError, match=r"^toy_noload\.half: no load"):
        registry.register(module.REGISTRATION, provider=module)
    registry.register(module.REGISTRATION)  # no provider given: it is checked when first loaded
    try:
        with pytest.raises(RegistrationError, match=r"^toy_noload\.half: no load \(a system module provides build"):
            registry.system_module("half")
    finally:
        registry.unregister("half")
    with pytest.raises(RegistrationError, match="not a core.registry.SystemSpec"):
        registry.register(types.SimpleNamespace(name="x"))


# What DEVELOPERS.md "Add a system" says a researcher writes: one module (REGISTRATION + build / is_built / load)
# and one entry point in the group ``qrs.systems`` of the distribution that installs it. Nothing else is edited.
ADDED_SYSTEM = '''
    """Ranks the collection by the number of pipeline terms each question shares with the query."""
    from core.data.pipeline import terms
    from core.registry import SystemSpec
    from core.retrieval.base import Hits, Retriever

    REGISTRATION = SystemSpec("shared-terms", "retriever", "Shared terms", "my_systems.shared_terms",
                              "none: counts shared terms", datasets=("*",), family="sparse", cheap=True)


    class SharedTerms(Retriever):
        def __init__(self, corpus):
            self.name = REGISTRATION.name
            self.ids = list(corpus)
            self.sets = [set(terms(text)) for text in corpus.values()]

        def rank(self, query):
            """(row, shared terms) of every question, most shared first (ties by row)."""
            shared = [(row, float(len(query & words))) for row, words in enumerate(self.sets)]
            return sorted(shared, key=lambda pair: (-pair[1], pair[0]))

        def retrieve(self, texts, k):
            top = [self.rank(set(terms(text)))[:k] for text in texts]
            return Hits([[self.ids[row] for row, _ in hits] for hits in top], [[s for _, s in hits] for hits in top])


    def build(dataset, profile="quick", progress=None, variant=None):
        """Nothing to train or index: the metrics say how many questions it ranks."""
        return {"questions": len(dataset.corpus)}


    def is_built(dataset, variant=None):
        return bool(dataset.corpus)  # any collection, at once


    def load(dataset, variant=None, **options):
        return SharedTerms(dataset.corpus)
'''


def test_add_a_system_as_developers_md_says(tiny_data, fresh_var, on_path):
    from core.data.datasets import load_dataset
    from core.serving.runner import SystemChoice, rank_one

    _package(on_path, "my_systems", {"shared_terms": ADDED_SYSTEM})
    info = on_path / "my_systems-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-systems\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[qrs.systems]\nshared-terms = my_systems.shared_terms\n", encoding="utf-8")
    registry.refresh()

    spec = registry.get_spec("shared-terms")
    assert spec in registry.list_systems("retriever") and spec.origin == "plugin:my-systems"
    assert registry.list_systems()[-1] is spec  # after the built-in systems
    code, out, _ = run_main("systems")
    assert code == 0 and any(line.startswith("shared-terms") for line in out.splitlines()), out
    dataset = load_dataset("qqp-bimpm")
    query_id = next(iter(dataset.queries))
    text = dataset.queries[query_id]
    ranking = rank_one(SystemChoice("shared-terms"), dataset, text, k=5)
    direct = sys.modules["my_systems.shared_terms"].load(dataset).retrieve([text], 5)
    assert ranking.system == "shared-terms" and ranking.doc_ids == direct.ids[0] and len(ranking) == 5
    assert ranking.scores == direct.scores[0] and ranking.scores[0] > ranking.scores[-1] >= 0
