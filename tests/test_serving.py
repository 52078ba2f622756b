"""Serve what was measured: one text pipeline, one loader, one runner.

- the pipeline gives raw and CoreNLP-tokenized text the same tokens, and an artifact built with another
  pipeline version is refused with one line (and counts as not built);
- an imported raw-text dataset is tokenized like the bundled CoreNLP text, queries and documents alike;
- Compare's default ranking of a query equals ``python -m core search`` for the same query and system;
- the runner loads through the loader (every import of core: tests/test_layers_imports.py);
- the typed-vs-tokenized top-10 of every registered system: tests/test_robustness.py (built systems).
"""
from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, TINY_DATA, run_main


# ----------------------------------------------------------------------------- the text pipeline
@pytest.mark.parametrize("typed, tokenized", [
    ("How can I stop my depression?", "How can I stop my depression ?"),
    ("Why don't cats like water?", "Why do n't cats like water ?"),
    ("What's Python's GIL?", "What 's Python 's GIL ?"),
    ("I can't sleep. Why?", "I ca n't sleep . Why ?"),
    ('What does "carpe diem" mean?', "What does `` carpe diem '' mean ?"),
    ("Is C++ (the language) hard?", "Is C++ -LRB- the language -RRB- hard ?"),
])
def test_pipeline_gives_typed_and_tokenized_text_the_same_tokens(typed, tokenized):
    from core.data.pipeline import terms, tokens
    from core.data.text import display_form

    assert tokens(typed) == tokens(tokenized)
    assert terms(typed) == terms(tokenized)
    assert tokens(display_form(tokenized)) == tokens(tokenized)
    assert "?" not in terms(typed) and all(t == t.lower() for t in tokens(typed))


def test_pipeline_splits_what_whitespace_did_not():
    from core.data.pipeline import terms, tokens
    from core.data.tokenizers import words

    assert tokens("How can I stop my depression?")[-2:] == ["depression", "?"]  # not "depression?"
    assert words("Don't STOP!") == ["do", "n't", "stop", "!"]
    assert terms("Hello, World!", lower=False) == ["Hello", "World"]


def test_artifact_from_another_pipeline_is_refused_with_one_line(tiny_data, fresh_var):
    from core.data.datasets import load_dataset
    from core.data.pipeline import PIPELINE_VERSION
    from core.errors import MissingArtifactError, describe_error
    from core.registry import system_dir
    from core.retrieval import bm25, wordmean

    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    wordmean.build(ds)
    assert bm25.is_built(ds) and wordmean.is_built(ds)
    for system, name in ((bm25, "bm25/config.json"), (wordmean, "glove-mean/vocab.json")):
        path = system_dir(ds.name, name.split("/")[0]) / name.split("/")[1]
        data = json.loads(path.read_text(encoding="utf-8"))
        data["text_pipeline"] = "whitespace-v0"
        path.write_text(json.dumps(data), encoding="utf-8")
        assert not system.is_built(ds)  # the build rebuilds it
        with pytest.raises(MissingArtifactError) as err:
            system.load(ds)
        line = describe_error(err.value)
        assert "\n" not in line and "whitespace-v0" in line and PIPELINE_VERSION in line
        assert f"python -m core build --systems {name.split('/')[0]}" in line  # nothing to train: a build


def test_imported_raw_text_is_tokenized_like_the_bundled_text(tiny_data, fresh_var, tmp_path):
    """The tiny QQP fixture written as people type it (display forms), imported as a pairs TSV: BM25 and
    glove-mean see the same tokens as on the bundled CoreNLP text, so both rank alike."""
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.data.text import display_form
    from core.serving.runner import SystemChoice, rank_one

    raw = tmp_path / "raw_pairs.tsv"
    rows = []
    for split in ("dev", "test"):
        for line in (TINY_DATA / "qqp-bimpm" / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
            label, q1, q2, _pid = line.split("\t")
            rows.append(f"{label}\t{display_form(q1)}\t{display_form(q2)}")
    raw.write_text("\n".join(rows) + "\n", encoding="utf-8")
    bundled = load_dataset("qqp-bimpm")
    imported = load_dataset(import_dataset("pairs", raw, "rawqqp"))
    assert not imported.tokenized or imported.corpus != bundled.corpus
    by_text = {display_form(t): d for d, t in bundled.corpus.items()}
    to_bundled = {d: by_text[t] for d, t in imported.corpus.items()}  # raw doc -> the same question, tokenized
    for name in ("bm25", "glove-mean"):
        for query in ("How can I stop my depression?", "Why don't people like Python's whitespace?"):
            a = rank_one(SystemChoice(name), bundled, query, 10)
            b = rank_one(SystemChoice(name), imported, query, 10)
            assert [to_bundled[d] for d in b.doc_ids] == a.doc_ids, (name, query)
            assert b.scores == pytest.approx(a.scores, abs=1e-5)


# ----------------------------------------------------------------------------- one runner
@pytest.mark.parametrize("query", ["How can I stop my depression?", "q00008"])
def test_compare_default_ranking_equals_cli_search(built, query):
    """The page's engine with the page's default state gives exactly ``python -m core search``'s ranking."""
    from core.analysis.compare import compare
    from core.data.datasets import load_dataset
    from core.judging.compare_state import CompareState
    from core.serving.runner import loader_for

    ds = load_dataset("qqp-bimpm")
    assert query in ds.queries or " " in query
    for name in ("bm25", "glove-mean"):
        qid = query if query in ds.queries else None
        text = ds.display_query(qid) if qid else query  # the page shows a dataset query in its display form
        state = CompareState("qqp-bimpm", text, qid, systems=(name,))
        assert state.index == "auto" and state.choices()[0].options == ()  # the systems' serving defaults
        result = compare(ds, text, state.choices(), loader_for(ds), k=10, query_id=qid)
        (column,) = result.results
        assert column.ok, column.error
        code, out, _err = run_main("search", "--system", name, "-k", "10", query)
        assert code == 0
        cli_ids = [line.split()[1] for line in out.splitlines()[2:] if line.split() and line.split()[0].isdigit()]
        assert column.ranking.doc_ids == cli_ids and len(cli_ids) == 10


# ----------------------------------------------------------------------------- imports
# Circles and upward imports over every module of core, and the runner loading through the loader:
# tests/test_layers_imports.py.
def test_the_old_second_paths_are_gone():
    """The run-a-system logic exists once: no module outside core.serving ranks through its own copy."""
    from core import registry
    from core.analysis import compare, error_analysis
    from core.serving import candidates

    assert not hasattr(registry, "load_system") and not hasattr(candidates, "rank")
    assert not hasattr(compare, "run_system") and not hasattr(error_analysis, "run_system")
    import core.transfer as transfer

    assert not hasattr(transfer, "load_named") and not hasattr(transfer, "ensure_cheap")


def test_the_server_watches_no_files():
    """The build writing var/ flooded the server's file watcher (951 inotify overflow lines)."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["fileWatcherType"] == "none"


def test_every_minilm_derived_system_carries_the_quora_note():
    """all-MiniLM-L6-v2 saw Quora duplicates; every system built on it says so on QQP."""
    from core.registry import contamination_note, list_systems

    derived = {s.name for s in list_systems() if s.minilm_derived}
    assert derived == {"minilm", "tree-bert", "minilm-pairs", "frm", "cross-encoder", "tree-bert-cross"}
    for name in [*derived, "fusion", "fusion@bm25+minilm:rrf"]:
        assert "Quora duplicates" in contamination_note(name, "qqp-bimpm")
    for name in ("bm25", "densetrans", "fusion@bm25+densetrans:rrf"):
        assert contamination_note(name, "qqp-bimpm") is None
    assert contamination_note("minilm", "trecqa") is None


def test_systems_that_deviate_from_their_paper_say_how():
    """A model is called by the paper's name only with its deviation named beside it."""
    from core.registry import deviation_note

    assert "τ 0.05" in deviation_note("densetrans") and "[CLS]" in deviation_note("densetrans")
    assert "keyword-agreement loss" in deviation_note("frm@kw-loss") and "Eq. 18 only" in deviation_note("frm")
    assert deviation_note("bm25") is None


def test_the_trained_models_listing_imports_no_system_module_without_artifacts(tiny_data, fresh_var, monkeypatch):
    """The Models page lists trained models on every visit; a system with no artifact folder on any dataset is
    answered from the folders alone, without importing its module (torch and the model code: most of a first
    visit's seconds)."""
    import core.transfer as transfer

    asked = []
    monkeypatch.setattr(transfer, "system_module", lambda name: asked.append(name) or pytest.fail(name))
    assert transfer.listing() == [] and asked == []


def test_a_retriever_module_loads_without_ranx():
    """ranx (with matplotlib and scipy.stats) loads where a run is built or evaluated, not with every retriever:
    a page that only lists or loads systems does not pay for it on its first visit."""
    import subprocess
    import sys

    code = "import sys, core.retrieval.base, core.retrieval.bert; print('ranx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-1500:]
