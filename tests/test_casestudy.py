"""Case studies (core): URL round-trip, exports stay escaped, saved cases persist, disagreement picks, CLI."""
from __future__ import annotations

import csv
import io
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx import Run

from core.data.text import strip_control

from core.judging.case_tables import (
    CaseColumn,
    CaseHit,
    CaseTable,
    escape_latex,
    escape_markdown,
    to_csv,
    to_latex,
    to_markdown,
    truncate,
)
from core.judging.casestudy import changes, disagreements, figure_image
from core.judging.compare_state import CompareState, StateOptions, resolve_dataset

OPTIONS = StateOptions(
    dataset="qqp-bimpm",
    datasets=("qqp-bimpm", "trecqa"),
    retrievers=("bm25", "minilm", "tree-bert", "densetrans", "sdml-cnn"),
    rerankers=("cross-encoder", "frm", "cnn-rerank"),
    query_ids=frozenset({"q1", "q2", "q00000"}),
)
TEXTS = {"q1": "How do I learn Python?", "q2": "Who will win the U.S.A presidential elections of 2016?",
         "q00000": "What is 2 + 2?"}
NASTY = r"Is C# & C++ 100% _the_ same? {x} $y$ ^z ~w \cite{a} | *b* `c` [d](e) <script>alert(1)</script>"


# ----------------------------------------------------------------------------- URL state
states = st.builds(
    CompareState,
    dataset=st.just("qqp-bimpm"),
    query=st.text(min_size=0, max_size=40).map(lambda s: " ".join(strip_control(s).split())),
    query_id=st.just(None),
    systems=st.lists(st.sampled_from(OPTIONS.retrievers), unique=True, max_size=3).map(tuple),
    rerankers=st.lists(st.sampled_from(OPTIONS.rerankers), unique=True, max_size=2).map(tuple),
    first_stage=st.sampled_from(OPTIONS.retrievers),
    depth=st.integers(1, 20).map(lambda i: 5 * i),
    k=st.integers(1, 50),
    index=st.sampled_from(["flat", "ivfpq", "ivf", "hnsw"]),
    nprobe=st.integers(1, 128),
    ef_search=st.integers(8, 512),
    beam=st.integers(1, 200),
    tree_k=st.sampled_from([5, 8, 10]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states, pick_baseline=st.integers(0, 5), use_qid=st.sampled_from([None, "q1", "q2"]))
def test_url_round_trip(state, pick_baseline, use_qid):
    labels = state.labels()
    baseline = labels[pick_baseline % len(labels)] if labels and pick_baseline < 4 else None
    state = CompareState(**{**state.__dict__, "baseline": baseline})
    if use_qid:
        state = CompareState(**{**state.__dict__, "query_id": use_qid, "query": TEXTS[use_qid]})
    params = state.to_params()
    assert all(isinstance(v, str) for v in params.values())
    back, notes = CompareState.from_params(params, OPTIONS, TEXTS.get)
    assert notes == []
    assert back == state


def test_defaults_make_a_short_link_and_st_query_params_lists_are_read():
    assert CompareState("qqp-bimpm").to_params() == {"dataset": "qqp-bimpm"}
    state, notes = CompareState.from_params({"dataset": ["x", "qqp-bimpm"], "k": ["3"]}, OPTIONS)
    assert (state.k, notes) == (3, [])


def test_invalid_params_fall_back_to_defaults_with_notes():
    params = {"dataset": "qqp-bimpm", "qid": "nope", "q": "How to cook rice?", "systems": "bm25,evil<b>",
              "rerankers": "frm,xyz", "first_stage": "frm", "depth": "7", "k": "999", "index": "ivf;drop",
              "nprobe": "ten", "ef": "-1", "beam": "1e9", "tree_k": "9", "baseline": "nobody", "utm": "x"}
    state, notes = CompareState.from_params(params, OPTIONS)
    assert state == CompareState("qqp-bimpm", query="How to cook rice?", systems=("bm25",), rerankers=("frm",))
    text = "\n".join(notes)
    for fragment in ("'nope'", "'evil<b>'", "'xyz'", "first stage 'frm'", "depth=", "k='999'", "index=",
                     "nprobe=", "ef=", "beam=", "tree_k=", "baseline 'nobody'", "'utm'"):
        assert fragment in text, fragment


def test_unknown_dataset_keeps_current_and_says_so():
    params = {"dataset": "../../etc", "qid": "q1"}
    assert resolve_dataset(params, OPTIONS.datasets, "qqp-bimpm") == "qqp-bimpm"
    assert resolve_dataset({"dataset": "trecqa"}, OPTIONS.datasets, "qqp-bimpm") == "trecqa"
    state, notes = CompareState.from_params(params, OPTIONS)
    assert state.query_id is None and any("'../../etc'" in n for n in notes)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(["dataset", "q", "qid", "systems", "rerankers", "first_stage", "depth", "k",
                                        "baseline", "index", "nprobe", "ef", "beam", "tree_k", "other"]),
                       st.text(max_size=30)))
def test_any_params_never_raise(params):
    state, notes = CompareState.from_params(params, OPTIONS)
    assert set(state.systems) <= set(OPTIONS.retrievers) and 1 <= state.k <= 50
    assert state.baseline is None or state.baseline in state.labels()
    assert isinstance(notes, list)


# ----------------------------------------------------------------------------- exports
def _table(text: str = NASTY) -> CaseTable:
    return CaseTable(
        dataset="qqp_bimpm#1", query=text, query_id="q_1", k=3,
        columns=(
            CaseColumn("bm25", (CaseHit(1, "d1", text, 12.5, 1), CaseHit(2, "d2", "=HYPERLINK(\"x\")", 3.0, 0),
                                CaseHit(3, "d3", "plain, \"quoted\"\nnewline", 1.0))),
            CaseColumn("cross-encoder ← bm25", (CaseHit(1, "d2", "=HYPERLINK(\"x\")", 0.9),), metrics=(("ndcg@10", 0.5),)),
            CaseColumn("densetrans", error="not built: python -m core train --system densetrans"),
        ),
        ground_truth=(text,),
    )


def _strip_latex_escapes(tex: str) -> str:
    tex = re.sub(r"\\text(backslash|asciicircum|asciitilde|less|greater|bar)\{\}", "", tex)
    return re.sub(r"\\[{}$&#%_]", "", tex)


def test_latex_is_balanced_and_escaped():
    tex = to_latex(_table(), max_chars=None, title="Table 4 & more_%")
    body = _strip_latex_escapes(tex.split("\n", 1)[1])  # the first line is a % comment
    depth = 0
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    assert not re.search(r"[$#%_^~]", body), "an unescaped special character"
    rows = [line for line in body.splitlines() if line.endswith(r"\\") and "multicolumn" not in line]
    assert rows and all(line.count("&") == 1 for line in rows)  # only the column separator
    assert r"\textcolor{red}{" in tex and r"\#1 & \textcolor{red}{Is C\# \& C++ 100\% \_the\_" in tex
    assert r"\textbackslash{}cite\{a\}" in tex and r"\textless{}script\textgreater{}" in tex
    assert r"\textbf{" in to_latex(_table(), mark="bold") and "xcolor" not in to_latex(_table(), mark="bold")


def test_escape_latex_single_pass():
    assert escape_latex("\\{}") == r"\textbackslash{}\{\}"
    assert escape_latex("a_b & c%") == r"a\_b \& c\%"


def _unescaped(text: str, ch: str) -> int:
    return len(re.findall(r"(?<!\\)(?:\\\\)*" + re.escape(ch), text))


def test_markdown_escapes_markup_in_every_text():
    md = to_markdown(_table(), max_chars=None, title="A | title *x*")
    table_rows = [line for line in md.splitlines() if line.startswith("|")]
    assert all(_unescaped(line, "|") == 3 for line in table_rows)  # two cells per row, nothing more
    assert "<script>" not in md and "\\<script\\>" in md
    assert "\\[d\\](e)" in md and "\\`c\\`" in md and "\\*b\\*" in md and "\\$y\\$" in md
    assert "**A \\| title \\*x\\***" in md
    assert "**" + escape_markdown(NASTY) + "** ✓" in md  # the relevant hit is marked


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_escape_markdown_round_trips(text):
    escaped = escape_markdown(text)
    assert re.sub(r"\\(.)", r"\1", escaped) == " ".join(strip_control(text).split())  # nothing lost
    for ch in "|*_`[]<>":
        assert _unescaped(escaped, ch) == 0


def test_truncation_is_configurable():
    long = "word " * 40
    assert truncate(long, 25) == "word word word word wo..."
    assert truncate(long, None) == long.strip()
    md = to_markdown(_table(long), max_chars=25)
    assert "| question | word word word word wo... |" in md and long.strip() not in md
    assert long.strip() in to_markdown(_table(long), max_chars=0)


def test_csv_round_trips_texts_and_neutralises_formulas():
    rows = list(csv.DictReader(io.StringIO(to_csv(_table()))))
    assert [(r["system"], r["rank"]) for r in rows] == [("bm25", "1"), ("bm25", "2"), ("bm25", "3"),
                                                        ("cross-encoder ← bm25", "1")]
    assert rows[0]["text"] == NASTY and rows[0]["relevant"] == "1" and rows[0]["qrel"] == "1"
    assert rows[1]["text"].startswith("'=HYPERLINK") and rows[1]["relevant"] == "0"
    assert rows[2]["text"] == 'plain, "quoted" newline'


def test_table_dict_round_trip():
    t = _table()
    assert CaseTable.from_dict(t.to_dict()) == t


# ----------------------------------------------------------------------------- saved cases
def test_saved_case_survives_restart_in_the_judgments_database(tmp_path):
    from core.judging.casestudy_store import CASE_SCHEMA_VERSION, CaseStudyError, CaseStudyStore
    from core.judging.judgments import JudgmentStore
    from core.judging.schema import SCHEMA_VERSION

    url = f"sqlite:///{tmp_path / 'judgments.sqlite'}"
    judgments = JudgmentStore(url)
    judgments.set_label("ann", "qqp-bimpm", "q text", "d1", "doc text", 2)
    store = CaseStudyStore(judgments=judgments)
    state = CompareState("qqp-bimpm", "q text", systems=("bm25",), k=3).to_params()
    saved = store.save(_table(), "  Table 4 <i>again</i> ", "ann", "a note", state)
    with pytest.raises(CaseStudyError):
        store.save(_table(), "   ", "ann")
    judgments.close()

    reopened = CaseStudyStore(url)  # a new process would do exactly this
    (case,) = reopened.list()
    assert case.id == saved.id and case.title == "Table 4 <i>again</i>" and case.note == "a note"
    assert case.table == _table() and case.state == state and case.author == "ann"
    assert reopened.judgments.judgments()[0].label == 2  # same database as the judgments
    assert reopened.judgments.schema_version() == SCHEMA_VERSION and reopened.schema_version() == CASE_SCHEMA_VERSION
    renamed = reopened.rename(case.id, "New title", "")
    assert (renamed.title, renamed.note) == ("New title", None) and renamed.updated_at >= case.updated_at
    assert reopened.list("trecqa") == [] and len(reopened.list("qqp_bimpm#1")) == 1
    assert reopened.delete(case.id) and not reopened.delete(case.id) and reopened.list() == []
    with pytest.raises(CaseStudyError):
        reopened.get(case.id)
    reopened.close()


def test_case_table_added_to_an_old_judgments_database(tmp_path):
    from core.judging.casestudy_store import CaseStudyStore
    from core.judging.database import make_engine
    from core.judging.migrations import create_v1

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = make_engine(url)
    create_v1(engine)
    with engine.execution_options(qrs_write=True).begin() as conn:
        conn.exec_driver_sql("INSERT INTO annotators (id, name, created_at) VALUES (1, 'old', '2020-01-01')")
    engine.dispose()
    store = CaseStudyStore(url)
    assert store.judgments.annotators() == ["old"] and store.schema_version() == 1
    store.save(_table(), "t", "old")
    store.close()
    assert len(CaseStudyStore(url).list()) == 1  # upgrading again is a no-op


# ----------------------------------------------------------------------------- changes, disagreements
def test_changes_between_saved_and_today():
    saved = CaseTable("d", "q", None, 3, (CaseColumn("bm25", tuple(CaseHit(i + 1, x, x, 1.0) for i, x in
                                                                    enumerate("abc"))), CaseColumn("frm")))
    today = CaseTable("d", "q", None, 3, (CaseColumn("bm25", tuple(CaseHit(i + 1, x, x, 1.0) for i, x in
                                                                    enumerate("bad"))),))
    bm25, frm = changes(saved, today)
    assert (bm25.entered, bm25.left, bm25.moves) == (("d",), ("c",), (("a", 1, 2), ("b", 2, 1)))
    assert 0 < bm25.rbo < 1 and not bm25.unchanged and frm.rbo is None
    (same,) = changes(today, today)
    assert same.unchanged and same.rbo == pytest.approx(1.0)


def _run(name: str, data: dict) -> Run:
    run = Run.from_dict(data, name=name)
    run.name = name
    return run


def test_disagreements_rank_by_per_query_delta():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"x": 0}}
    run_a = _run("A", {"q1": {"a": 2.0, "z": 1.0}, "q2": {"z": 2.0, "b": 1.0}, "q3": {"c": 1.0}})
    run_b = _run("B", {"q1": {"z": 2.0, "y": 1.5, "a": 1.0}, "q2": {"b": 1.0}, "q3": {"c": 1.0}})
    rows = disagreements(qrels, run_a, run_b, "ndcg@10", top=2)
    assert [r.query_id for r in rows] == ["q1", "q2"]  # |1 - 1/log2(4)| > |1/log2(3) - 1| > 0
    assert rows[0].delta == pytest.approx(0.5) and rows[1].delta == pytest.approx(1 / math.log2(3) - 1)
    assert disagreements(qrels, run_a, run_b, "ndcg@10", top=0) == []


def test_chart_image_export_reports_why_not(monkeypatch):
    """Each way image export can go: no kaleido -> says so; kaleido but the export fails (no Chrome,
    offline) -> says why; export works -> the image bytes. Each branch is forced, none may pass vacuously."""
    import plotly.graph_objects as go
    import plotly.io._kaleido as kaleido_io

    figure = go.Figure(go.Heatmap(z=[[1, 0], [0, 1]]))
    monkeypatch.setattr(kaleido_io, "kaleido_available", lambda: False)
    image = figure_image(figure, "svg")
    assert image.data is None and "kaleido" in image.reason and "CSV" in image.reason and image.mime == "image/svg+xml"

    monkeypatch.setattr(kaleido_io, "kaleido_available", lambda: True)
    monkeypatch.setattr(go.Figure, "to_image", lambda self, **kw: (_ for _ in ()).throw(RuntimeError("no Chrome")))
    image = figure_image(figure, "png")
    assert image.data is None and "RuntimeError: no Chrome" in image.reason and "CSV" in image.reason

    monkeypatch.setattr(go.Figure, "to_image", lambda self, format: b"<svg>" + format.encode())
    image = figure_image(figure, "svg")
    assert image.data == b"<svg>svg" and image.reason == ""
    with pytest.raises(ValueError, match="png or svg"):
        figure_image(figure, "gif")


# ----------------------------------------------------------------------------- CLI
def test_cli_casestudy_queries_and_disagreements(tiny_data, fresh_var, tmp_path, capsys):
    from core.cli.main import main
    from core.data.datasets import load_dataset
    from core.retrieval import bm25

    bm25.build(load_dataset("qqp-bimpm"))
    qfile = tmp_path / "queries.txt"
    qfile.write_text("q00000\n# a comment\nHow do I learn Python_3 & C# fast?\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["casestudy", "--queries", str(qfile), "--systems", "bm25", "--k", "3", "--format", "tex",
                 "--out", str(out)]) == 0
    files = sorted(out.glob("*.tex"))
    assert len(files) == 2
    first, second = (f.read_text(encoding="utf-8") for f in files)
    assert r"\#3 & " in first and r"\#4" not in first and r"\textcolor{red}{" in first
    assert r"Python\_3 \& C\# fast?" in second
    assert main(["casestudy", "--disagree", "bm25,bm25", "--top", "2", "--k", "2", "--format", "md",
                 "--out", str(tmp_path / "md")]) == 0
    mds = sorted((tmp_path / "md").glob("*.md"))
    assert len(mds) == 2 and "delta +0.000" in mds[0].read_text(encoding="utf-8")
    assert main(["casestudy", "--systems", "bm25"]) == 2
    assert "--queries FILE or --disagree" in capsys.readouterr().err
