"""Every trainable system trains on every imported kind: a BEIR folder, a pairs file, a candidate list.

The systems come from the registry (every registration whose default build is a trained model, and the trained
variants of untrained systems such as ``minilm@finetuned``), never from a list; each trains with its ``smoke``
profile (a few steps: a wiring check that measures nothing) through ``core.build.train_system``, what ``python -m
core train`` runs, and the trained model then ranks its own dataset through the one loader and runner.
"""
from __future__ import annotations

import pytest

from tests.byod_env import byod  # noqa: F401  (byod: a fixture)
from tests.conftest import FIXTURES

KINDS = ("beir", "pairs", "candidates")


def trainable() -> list[tuple[str, str | None]]:
    """(system, variant) of every trained model the registry builds: a trained system's default, or the trained
    variant of a system that is not trained itself (a fixed run is not a model)."""
    import core  # noqa: F401  (CPU kernels pinned before torch loads)
    from core.registry import list_systems, needs_training

    return [(spec.name, variant) for spec in list_systems() if spec.kind_family != "run"
            for variant in (None, *spec.variants)
            if needs_training(spec, variant) and (variant is None or not needs_training(spec, None))]


@pytest.fixture()
def imported(byod):
    """user/cqa (BEIR), user/answers (candidate list) and user/pairs (a pairs TSV of QQP rows) by kind."""
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset

    cqa, answers = byod
    pairs = load_dataset(import_dataset("pairs", FIXTURES / "data" / "qqp-bimpm" / "test.tsv", "pairs"))
    return {"beir": cqa, "pairs": pairs, "candidates": answers}


def test_the_registry_has_trainable_systems_of_both_kinds():
    from core.registry import get_spec

    names = trainable()
    assert {get_spec(s).kind for s, _ in names} == {"retriever", "reranker"}
    assert ("sdml-cnn", None) in names and any(v for _, v in names)  # a trained variant of an untrained system


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("system,variant", trainable())
def test_trains_on_every_imported_kind(imported, kind, system, variant):
    from core.build import train_system
    from core.registry import get_spec, supports
    from core.serving.runner import SystemChoice, rank_many

    dataset = imported[kind]
    if not supports(get_spec(system), dataset):
        assert kind == "candidates" and not get_spec(system).pair_scoring  # a tree over a whole collection
        return
    status = train_system(dataset, system, variant=variant, profile="smoke", force=True)
    assert status.state == "ready", status.error
    assert status.metrics["split"]["train"]["pairs"] > 0
    qid = dataset.query_splits["test"][0]
    name = system + (f"@{variant}" if variant else "")
    rankings = rank_many(SystemChoice(name), dataset, {qid: dataset.queries[qid]}, k=5)
    assert rankings[qid].doc_ids, f"{name} ranked nothing on {dataset.name}"
