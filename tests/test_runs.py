"""Stored runs (core.analysis.runs): written by the build, fresh until the model changes, read by Error Analysis."""
from __future__ import annotations

import json
import os

import pytest

from core.errors import UnknownNameError


@pytest.fixture
def ds(tiny_data, fresh_var):
    from core.data.datasets import load_dataset

    return load_dataset("qqp-bimpm")


def test_build_writes_a_trec_run_per_system_with_the_query_dropped(ds):
    from core.analysis import runs
    from core.build import build_system
    from core.evaluation import read_trec_run

    status = build_system(ds, "bm25")
    assert status.state == "ready" and "stored_run_seconds" in status.metrics
    path = runs.run_path(ds.name, "bm25")
    assert path.is_file() and runs.run_status(ds, "bm25") == "fresh"
    assert path.with_suffix(".npz").is_file()  # the fast twin the page reads
    twin = runs.read_run_dict(path, k=100)
    path.with_suffix(".npz").unlink()
    parsed = runs.read_run_dict(path, k=100)  # parses the TREC file and rebuilds the twin
    assert path.with_suffix(".npz").is_file() and parsed.keys() == twin.keys()
    for q in twin:
        assert list(parsed[q]) == list(twin[q]) and list(parsed[q].values()) == pytest.approx(list(twin[q].values()))
    run = read_trec_run(path)
    assert set(run.keys()) <= set(ds.queries) and len(run.keys()) > 0.9 * len(ds.queries)
    for q, docs in run.to_dict().items():
        assert q not in docs and len(docs) <= runs.STORED_DEPTH
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["depth"] == 100 and meta["queries"] == len(ds.queries)


def test_stored_run_equals_a_computed_run_and_goes_stale_when_the_model_changes(ds):
    from core.analysis import runs
    from core.build import build_system
    from core.registry import system_dir

    build_system(ds, "bm25")
    queries = ds.split_queries("test")
    (stored,) = runs.load_runs(ds, ["bm25"], queries, k=10)
    computed = runs.compute_rankings("bm25", ds, queries, k=10)
    got = stored.to_dict()
    for q, r in computed.items():  # same scores; same docs above the k-th score (ties may swap)
        stored_scores = sorted(got.get(q, {}).values(), reverse=True)
        assert [round(x, 4) for x in stored_scores] == [round(x, 4) for x in r.scores]
        if r.scores:
            cut = r.scores[-1] + 1e-4
            assert {d for d, x in got[q].items() if x > cut} == {d for d, x in zip(r.doc_ids, r.scores) if x > cut}
    # the model changes: its config is rewritten -> the stored run is stale and not used
    cfg = system_dir(ds.name, "bm25") / "config.json"
    cfg.write_text(cfg.read_text().replace("}", ', "touched": 1}', 1))
    assert runs.run_status(ds, "bm25") == "stale" and runs.stored_run(ds, "bm25") is None
    seen = []
    (again,) = runs.load_runs(ds, ["bm25"], queries, k=10, progress=lambda f, m: seen.append((f, m)))
    assert again.to_dict().keys() == got.keys()
    assert any(f"/{len(queries):,} queries" in m for _, m in seen)  # counts reported while computing
    assert all(0.0 <= f <= 1.0 for f, _ in seen)
    # the next build (already built) rewrites the stale run
    build_system(ds, "bm25")
    assert runs.run_status(ds, "bm25") == "fresh"


def test_load_runs_reads_the_stored_file_without_loading_the_system(ds):
    from core.analysis import runs
    from core.build import build_system

    build_system(ds, "bm25")

    def refuse(name, variant=None):
        raise AssertionError(f"{name} should not be loaded: its stored run is fresh")

    queries = ds.split_queries("test")
    (run,) = runs.load_runs(ds, ["bm25"], queries, k=5, loader=refuse)
    assert run.name == "bm25" and set(run.keys()) <= set(queries)
    assert all(len(d) <= 5 for d in run.to_dict().values())
    with pytest.raises(UnknownNameError):
        runs.load_runs(ds, ["bm25@nope"], queries)


def test_a_stored_run_is_atomic_and_stale_after_a_weights_change(ds):
    from core.analysis import runs
    from core.build import build_system
    from core.registry import system_dir

    build_system(ds, "bm25")
    leftovers = [p for p in runs.run_path(ds.name, "bm25").parent.iterdir() if ".tmp" in p.name]
    assert leftovers == []
    weights = [p for p in system_dir(ds.name, "bm25").rglob("*") if p.is_file() and not p.name.endswith(".json")]
    assert weights
    st = weights[0].stat()
    os.utime(weights[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert runs.run_status(ds, "bm25") == "stale"
    assert runs.default_split(ds) == "test"


def test_building_a_variant_leaves_the_defaults_stored_run_fresh(ds):
    """A variant has its own folder: building ``bm25@classic`` does not make the default's run stale."""
    from core.analysis import runs
    from core.build import build_system

    build_system(ds, "bm25")
    before = runs.fingerprint(ds, "bm25")
    build_system(ds, "bm25", variant="classic")
    assert runs.run_status(ds, "bm25") == "fresh" and runs.fingerprint(ds, "bm25") == before
    assert runs.run_status(ds, "bm25", "classic") == "fresh"


def test_a_fusions_stored_run_is_fused_from_its_parts_and_matches_the_live_system(ds):
    from core.analysis import runs
    from core.build import build_system
    from core.serving.loader import load as load_system

    variant = "bm25+bm25[classic]:combsum"
    build_system(ds, "bm25")
    build_system(ds, "bm25", variant="classic")
    status = build_system(ds, "fusion", variant=variant)
    assert status.state == "ready" and "stored_run_error" not in status.metrics
    assert runs.run_status(ds, "fusion", variant) == "fresh"
    queries = ds.split_queries("test")
    (stored,) = runs.load_runs(ds, [f"fusion@{variant}"], queries, k=100)
    live = load_system("fusion", ds, variant=variant).search_many(queries, k=100)
    got = stored.to_dict()
    for q, r in live.items():
        assert q not in got.get(q, {})
        assert [round(x, 4) for x in sorted(got.get(q, {}).values(), reverse=True)] == [round(x, 4) for x in r.scores]
