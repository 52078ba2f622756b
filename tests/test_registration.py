"""A system is one registration: what callers need comes from ``core.registry``, systems added at run time
(``register``) are seen everywhere the built-in ones are, and nobody else keeps a list of system names."""
from __future__ import annotations

import re
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

from core import registry
from core.registry import SystemSpec

ROOT = Path(__file__).resolve().parents[1]
NAMES = re.compile(r"[\"'](bm25|minilm|glove-mean|dual-encoder|tree-bert|densetrans|sdml-cnn|fusion|minilm-pairs|frm"
                   r"|cnn-rerank|cross-encoder|tree-bert-cross)[\"']")
SCANNED = ("core/analysis", "core/judging", "core/serving", "core/data", "core/cli", "ui", "pages")
MAX_QUOTED = 5


def quoted_names() -> list[str]:
    """``path:line: text`` of every quoted built-in system name in the scanned folders."""
    out = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if NAMES.search(line):
                    out.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return out


def test_at_most_five_quoted_system_names_outside_the_registry():
    found = quoted_names()
    assert len(found) <= MAX_QUOTED, "system names typed outside the registry:\n" + "\n".join(found)


def test_the_counter_sees_a_quoted_name(tmp_path, monkeypatch):
    assert NAMES.search('x = "densetrans"') and NAMES.search("first_stage='bm25'")
    assert not NAMES.search("DenseTrans") and not NAMES.search('"bm25-hard"') and not NAMES.search("fusion@x")


def test_derived_facts_equal_the_lists_they_replace():
    def names(pred) -> set[str]:
        return {s.name for s in registry.list_systems() if s.origin == "built-in" and pred(s)}

    assert names(lambda s: s.ann_indexable) == {"densetrans", "sdml-cnn", "minilm", "dual-encoder", "glove-mean"}
    assert names(lambda s: s.milvus_servable) == {"bm25", "minilm", "glove-mean", "dual-encoder", "densetrans",
                                                  "sdml-cnn"}
    assert names(lambda s: s.cheap) == {"bm25", "glove-mean", "minilm-pairs"}  # built on first use, in seconds
    assert names(lambda s: s.composite) == {"fusion"}
    assert names(lambda s: bool(s.not_stored)) == {"tree-bert-cross"}
    assert {s.name: s.reference for s in registry.list_systems() if s.reference} == {
        "dual-encoder": "glove-mean", "densetrans": "glove-mean", "sdml-cnn": "glove-mean",
        "cross-encoder": "minilm-pairs", "frm": "minilm-pairs", "cnn-rerank": "bm25"}
    assert registry.default_first_stage() == "bm25" and registry.rerank_depth() == 20
    assert registry.get_spec("tree-bert").exact_reference == "minilm"
    assert [s.name for s in registry.with_knob("beam")] == ["tree-bert"]
    assert {label: (name, src.variant, src.pooling, src.options) for label, (name, src) in registry.layer_sources().items()} == {
        "MiniLM [CLS]": ("minilm", None, "cls", ()), "MiniLM mean": ("minilm", None, "mean", ()),
        "DenseTrans": ("densetrans", None, None, (("index", "flat"),)),
        "DenseTrans -AllDense": ("densetrans", "-AllDense", None, (("index", "flat"),))}
    assert registry.reference_of("frm@kw-loss") == "minilm-pairs" and registry.reference_of("nope") is None
    assert all(s.kind_family in registry.FAMILIES for s in registry.list_systems())
    assert all(s.family for s in registry.list_systems() if s.origin == "built-in"), "every built-in names its family"


class ToyProvider:
    """A provider made by ``pkg.mod:Factory`` (what a plugin's registration may point at)."""

    def __init__(self, spec: SystemSpec) -> None:
        self.spec = spec

    def build(self, dataset, profile="quick", progress=None, variant=None) -> dict:  # noqa: ANN001
        return {}

    def is_built(self, dataset, variant=None) -> bool:  # noqa: ANN001
        return True

    def load(self, dataset, variant=None, **options):  # noqa: ANN001, ANN003
        raise NotImplementedError("never loaded here")


@pytest.fixture
def toy():
    spec = SystemSpec("toy-dense", "retriever", "Toy dense", f"{__name__}:ToyProvider", "none", datasets=("*",),
                      variants=("a", "b"), family="dense", origin="user", source="/tmp/toy")
    registry.register(spec)
    yield spec
    registry.unregister(spec.name)


def test_a_registered_system_is_seen_like_a_built_in_one(toy):
    assert toy in registry.list_systems("retriever") and toy not in registry.list_systems("reranker")
    assert registry.get_spec("toy-dense@a") is toy
    assert registry.parse_name("toy-dense@b") == registry.SystemName("toy-dense", "b")
    assert registry.display_name("toy-dense@b") == "Toy dense b"
    provider = registry.system_module("toy-dense")
    assert isinstance(provider, ToyProvider) and provider.spec is toy
    assert registry.system_module("toy-dense") is provider  # made once
    registry.unregister("toy-dense")
    with pytest.raises(registry.UnknownNameError):
        registry.get_spec("toy-dense")
    registry.register(toy)  # the fixture unregisters it again


def test_register_takes_a_module_or_object_and_refuses_clashes(toy):
    module = types.SimpleNamespace(build=lambda *a, **k: {}, is_built=lambda *a, **k: False, load=lambda *a, **k: None)
    other = SystemSpec("toy-rerank", "reranker", "Toy reranker", "not.imported", "none", origin="plugin:toy-dist")
    registry.register(other, module)
    try:
        assert registry.system_module("toy-rerank") is module
        assert other in registry.list_systems("reranker")
    finally:
        registry.unregister("toy-rerank")
    with pytest.raises(ValueError, match="built-in"):
        registry.register(replace(toy, name="bm25"))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(toy)
    registry.register(replace(toy, title="Toy again"), replace=True)
    assert registry.get_spec("toy-dense").title == "Toy again"
    for bad in (replace(toy, name="a@b"), replace(toy, name="x", kind="ranker")):
        with pytest.raises(ValueError):
            registry.register(bad)
    with pytest.raises(ValueError):
        registry.unregister("bm25")


def test_discovery_runs_once_on_first_lookup_and_again_after_refresh(monkeypatch):
    from core import plugins

    calls = []
    spec = SystemSpec("found", "retriever", "Found", "x", "none", datasets=("*",), origin="plugin:x")
    provider = types.SimpleNamespace(build=lambda *a, **k: {}, is_built=lambda *a, **k: False, load=lambda *a, **k: None)

    def discover(register, problems, unloaded) -> tuple:
        calls.append(len(registry.list_systems()))  # asking the registry while discovering: built-ins only
        register(spec, provider=provider)
        return ()

    monkeypatch.setattr(plugins, "discover_plugins", discover)
    registry.refresh()
    try:
        built_in = [s for s in registry.list_systems() if s.origin == "built-in"]
        assert registry.get_spec("found") is spec and calls == [len(built_in)]
        assert "found" in [s.name for s in registry.list_systems()] and len(calls) == 1
        registry.refresh()
        assert "found" not in registry._REGISTERED
        assert registry.get_spec("found") is spec and len(calls) == 2
    finally:
        monkeypatch.undo()
        registry.refresh()
    assert "found" not in [s.name for s in registry.list_systems()]
