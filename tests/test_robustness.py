"""Robustness: hostile queries through every registered system built on the tiny fixture and through
the pages. Malformed dataset and run files: tests/test_malformed_files.py.

Every system in ``core.registry.list_systems()`` is built once per session through its module's
``build(dataset)`` (the default quick build) on the tiny fixture (244 questions) in a private
artifacts folder, then fuzzed: retrievers through ``search``, rerankers through ``rerank`` of BM25's
candidates. A system that cannot be built or loaded fails its own test with the reason; a system the
registry says does not apply to the dataset is skipped with the registry's reason.
Durability (SIGKILL) and concurrency (8 processes × 500 labels) are in tests/test_judgment_faults.py.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from core.errors import QueryError
from core.registry import list_systems
from core.retrieval.base import MAX_QUERY_CHARS, validate_query
from tests.conftest import ROOT, TINY_DATA

ALL_SYSTEMS = [s.name for s in list_systems()]
FIRST_STAGE_DEPTH = 20

INJECTIONS = [
    "'; DROP TABLE judgments; --",
    "\" OR 1=1 --",
    "Robert'); DELETE FROM queries WHERE ('1'='1",
    "<script>alert('x')</script>",
    "<img src=x onerror=alert(1)>",
    "**bold** _it_ [link](javascript:alert(1)) ![img](http://127.0.0.1/x.png) $x^2$",
    "{{7*7}} ${7*7} %s %n",
    "../../etc/passwd",
]
HOSTILE = [
    "", "   ", "\t\n\r ", "\u200b\u200b", "a" * 10_000, "why " * (MAX_QUERY_CHARS // 4 + 1),
    "🔎🙂👩‍👩‍👧‍👦 how to cook rice 🍚", "كيف أتعلم البرمجة بسرعة؟", "מה השעה \u202eevil\u202c ?",
    "\x00\x01\x07\x1b[31mred\x1b[0m question\x7f", "line\nbreak\rcarriage", "Ｆｕｌｌ ｗｉｄｔｈ ｑｕｅｓｔｉｏｎ",
    "What is the meaning of life ?", *INJECTIONS,
]

queries = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=300),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), max_size=50),
    st.text(alphabet=st.characters(categories=["So", "Sk", "Mn", "Lo"]), min_size=1, max_size=60),
    st.builds(lambda a, b: a + " " + b, st.sampled_from(INJECTIONS), st.text(max_size=40)),
)


# ----------------------------------------------------------------------------- fixtures
@dataclass
class TinyEnv:
    """The tiny fixture, its private artifacts folder, every loaded system, and why any is missing."""

    ds: object
    var: object
    systems: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)  # name -> the registry's reason it does not apply
    broken: dict = field(default_factory=dict)  # name -> why it could not be built or loaded
    seconds: dict = field(default_factory=dict)  # name -> seconds of one ordinary query


@pytest.fixture(scope="session")
def tiny_env(tmp_path_factory) -> TinyEnv:
    """Build every registered system once per session on the tiny fixture (env restored afterwards)."""
    var = tmp_path_factory.mktemp("robust_var")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(TINY_DATA))
        mp.setenv("QRS_VAR", str(var))
        from core.data.datasets import load_dataset
        from core.registry import supports, system_module
        from core.serving.loader import load as load_system

        env = TinyEnv(load_dataset("qqp-bimpm"), var)
        for spec in _build_order(list_systems()):
            if not supports(spec, env.ds):
                env.skipped[spec.name] = f"{spec.name} does not apply to {env.ds.name} (core.registry.supports)"
                continue
            try:
                _fast_build(spec.name, system_module(spec.name), env.ds)
                env.systems[spec.name] = load_system(spec.name, env.ds)
            except Exception as exc:  # noqa: BLE001 - reported by that system's own test
                env.broken[spec.name] = f"{type(exc).__name__}: {str(exc)[:500]}"
        for name, system in env.systems.items():
            start = time.perf_counter()
            try:
                _rank(env, system, "How do I learn Python ?", 10)
            except Exception:  # noqa: BLE001 - the system's own tests report it
                continue
            env.seconds[name] = time.perf_counter() - start
    return env


FEW_STEPS = {"max_steps": 8, "eval_every": 4, "patience": 1, "epochs": 1, "max_epochs": 1, "patience_epochs": 1,
             "train_pairs": 64, "dev_pairs": 32, "batch_size": 8}
"""Learned systems train a few steps only: the fuzz suite checks behaviour on hostile input, not quality."""


def _few_steps(config):
    """A copy of a build config (a dataclass, with an optional nested ``plan``) capped at ``FEW_STEPS``."""
    import dataclasses

    if not dataclasses.is_dataclass(config):
        return config
    names = {f.name for f in dataclasses.fields(config)}
    changes = {k: v for k, v in FEW_STEPS.items() if k in names and isinstance(getattr(config, k), int)}
    if "plan" in names and dataclasses.is_dataclass(config.plan):
        changes["plan"] = _few_steps(config.plan)
    return dataclasses.replace(config, **changes)


def _fast_build(name: str, module, ds) -> None:
    """The module's own ``build(ds, "quick", ...)`` -- the app's code path -- with its quick config capped
    at a few training steps where ``build`` takes one (``config=`` or ``train_config=``). A module whose
    config cannot be made that way is built with its defaults."""
    import inspect

    params = inspect.signature(module.build).parameters
    extra = {}
    try:
        if "config" in params and hasattr(module, "make_config"):
            extra = {"config": _few_steps(module.make_config("quick"))}
        elif "train_config" in params:
            annotation = str(params["train_config"].annotation)
            cls = next((getattr(module, n) for n in dir(module) if n.endswith("Config") and n in annotation), None)
            if cls is not None:
                extra = {"train_config": _few_steps(cls())}
    except (TypeError, ValueError):
        extra = {}  # the module changed its knobs: its default build
    if "loader" in params:  # a composite system (fusion) takes its parts through the one loader, as core.build passes it
        from core.serving.loader import part_loader

        extra["loader"] = part_loader(ds)
    module.build(ds, "quick", **extra)


def _build_order(specs):
    """BM25, then rerankers, then the other retrievers: composite retrievers (tree-bert-cross reuses the
    cross-encoder, fusion reuses retrievers) find their parts already built the fast way."""
    first = [s for s in specs if s.name == "bm25"]
    rerankers = [s for s in specs if s.kind == "reranker"]
    return first + rerankers + [s for s in specs if s not in first and s not in rerankers]


def _system(env: TinyEnv, name: str):
    if name in env.skipped:
        pytest.skip(env.skipped[name])
    if name in env.broken:
        pytest.fail(f"{name} could not be built/loaded on the tiny fixture: {env.broken[name]}")
    return env.systems[name]


def _is_reranker(system) -> bool:
    from core.retrieval.base import Reranker

    return isinstance(system, Reranker)


def _rank(env: TinyEnv, system, text: str, k: int, exclude=("q00000",)):
    """A retriever searches; a reranker reorders BM25's candidates for the (cleaned) query."""
    if not _is_reranker(system):
        return system.search(text, k, exclude=list(exclude))
    first = env.systems["bm25"].search(validate_query(text), FIRST_STAGE_DEPTH, exclude=list(exclude))
    return system.rerank(text, first, env.ds.corpus, k=k)


def _examples(env: TinyEnv, name: str) -> int:
    """Hypothesis examples per system: 40 for BM25, 12 for the others, fewer (>= 4) for a system whose
    single query takes seconds (tree-bert-cross scores cross-encoder pairs inside the tree search)."""
    if name == "bm25":
        return 40
    seconds = env.seconds.get(name, 0.0)
    return max(4, min(12, int(6.0 / seconds))) if seconds > 0 else 12


def check_ranking(ranking, ds, k: int, exclude: set[str]) -> None:
    assert len(ranking.doc_ids) <= k
    assert len(set(ranking.doc_ids)) == len(ranking.doc_ids)
    assert set(ranking.doc_ids) <= set(ds.corpus) and not set(ranking.doc_ids) & exclude
    assert all(math.isfinite(s) for s in ranking.scores)
    assert all(a >= b - 1e-6 for a, b in zip(ranking.scores, ranking.scores[1:]))


# ----------------------------------------------------------------------------- systems
def test_every_registered_system_is_fuzzed():
    """The fuzz suite covers the registry, not a hand-picked list."""
    assert ALL_SYSTEMS == [s.name for s in list_systems()] and len(ALL_SYSTEMS) >= 9


# fixture questions written the way people type them: contractions, possessives, punctuation attached,
# capitals; each is also in the collection's CoreNLP form (see the premise checked below)
TYPED_QUESTIONS = [
    ("How can I stop my depression?", "How can I stop my depression ?"),
    ("Why don't people like Python's whitespace rules?", "Why do n't people like Python 's whitespace rules ?"),
    ("What's the best way to learn German, fast?", "What 's the best way to learn German , fast ?"),
    ("I can't sleep at night. What should I do?", "I ca n't sleep at night . What should I do ?"),
    ("How do I root an Android device (without a PC)?", "How do I root an Android device -LRB- without a PC -RRB- ?"),
]


@pytest.mark.parametrize("name", ALL_SYSTEMS)
def test_typed_and_tokenized_forms_give_the_same_top10(name, tiny_env):
    """A question as people type it and its CoreNLP-tokenized form rank alike in every system,
    through the one runner (dataset queries: their display form vs the stored text; plus typed questions)."""
    from core.data.pipeline import tokens
    from core.serving.runner import SystemChoice, rank_one

    system = _system(tiny_env, name)
    ds = tiny_env.ds
    choice = SystemChoice(name, first_stage="bm25" if _is_reranker(system) else None, depth=FIRST_STAGE_DEPTH)
    load = lambda n, v=None, o=(): tiny_env.systems[n]  # noqa: E731 - the runner's Loader over the built systems
    # every typed question; fewer dataset queries for a system whose single query takes seconds (_examples)
    slow = tiny_env.seconds.get(name, 0.0) > 1.0
    dataset_pairs = [(ds.display_query(q), ds.queries[q], q) for q in sorted(ds.queries)
                     if ds.display_query(q) != ds.queries[q]][:3 if slow else 8]
    pairs = dataset_pairs + [(typed, tokenized, None) for typed, tokenized in TYPED_QUESTIONS]
    assert len(dataset_pairs) >= 3
    for typed, tokenized, qid in pairs:
        assert tokens(typed) == tokens(tokenized)  # the premise: one text pipeline for both forms
        a = rank_one(choice, ds, typed, 10, qid, load)
        b = rank_one(choice, ds, tokenized, 10, qid, load)
        assert a.doc_ids == b.doc_ids, (typed, tokenized)


@pytest.mark.parametrize("name", ALL_SYSTEMS)
def test_every_system_survives_hostile_queries(name, tiny_env):
    """Each hostile query either ranks (valid ranking) or is refused with a QueryError saying why."""
    system = _system(tiny_env, name)
    ds = tiny_env.ds

    @settings(max_examples=_examples(tiny_env, name), deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(text=queries, k=st.integers(1, 30))
    def run(text, k):
        try:
            expected = validate_query(text)
        except QueryError as exc:
            assert str(exc)
            with pytest.raises(QueryError) as err:
                _rank(tiny_env, system, text, k) if not _is_reranker(system) else system.rerank(
                    text, tiny_env.systems["bm25"].search("python", 5), ds.corpus, k=k)
            assert str(err.value) == str(exc)
            return
        ranking = _rank(tiny_env, system, text, k)
        check_ranking(ranking, ds, k, {"q00000"})
        assert "\x00" not in expected and len(expected) <= MAX_QUERY_CHARS

    run()


@pytest.mark.parametrize("name", ALL_SYSTEMS)
@pytest.mark.parametrize("text, message", [
    ("", "empty"), (" \t\n ", "empty"), ("\x00\x01\x1b", "empty"), ("a" * 10_000, "limit is 2,000"),
])
def test_rejected_queries_say_why(name, text, message, tiny_env):
    system = _system(tiny_env, name)
    with pytest.raises(QueryError, match=message):
        if _is_reranker(system):
            system.rerank(text, tiny_env.systems["bm25"].search("python", 5), tiny_env.ds.corpus)
        else:
            system.search(text, 10)


@pytest.mark.parametrize("name", ALL_SYSTEMS)
def test_batched_calls_take_odd_texts_without_validation(name, tiny_env):
    """search_many / rerank_many feed dataset text straight to the model: odd texts in one batch must not
    break it."""
    from core.retrieval.base import Ranking

    system = _system(tiny_env, name)
    ds = tiny_env.ds
    texts = {"a": "🍚🍚🍚", "b": "كيف أتعلم البرمجة", "c": "x" * MAX_QUERY_CHARS, "d": "How do I learn Python ?",
             "e": INJECTIONS[3]}
    if _is_reranker(system):
        ids = list(ds.corpus)[:6]
        candidates = {q: Ranking("pool", ids, [0.0] * len(ids)) for q in texts}
        out = system.rerank_many(texts, candidates, ds.corpus, k=5)
    else:
        out = system.search_many(texts, k=5)
    assert set(out) == set(texts)
    for qid, ranking in out.items():
        check_ranking(ranking, ds, 5, {qid})
    assert out["d"].doc_ids  # a normal query still finds something in the same batch


@pytest.mark.parametrize("name", ALL_SYSTEMS)
def test_hostile_query_gives_same_ranking_as_its_clean_form(name, tiny_env):
    """Control characters and extra whitespace are cleaned, not searched: same ranking as the clean text."""
    system = _system(tiny_env, name)
    dirty = _rank(tiny_env, system, "  How\x00 do I\t\tlearn \u200bPython ?\x1b ", 5)
    clean = _rank(tiny_env, system, "How do I learn Python ?", 5)
    assert dirty.doc_ids == clean.doc_ids


# ----------------------------------------------------------------------------- pages (AppTest)
def _page(path: str) -> AppTest:
    return AppTest.from_file(str(ROOT / path), default_timeout=120)


@pytest.fixture
def page_env(tiny_env, monkeypatch):
    monkeypatch.setenv("QRS_DATA", str(TINY_DATA))
    monkeypatch.setenv("QRS_VAR", str(tiny_env.var))
    return tiny_env.ds


COMPARE_CASES = [
    ("", "info", "Type a question"),
    ("   \t ", "info", "Type a question"),
    ("\x00\x01\x02", "error", "empty"),
    ("a" * 10_000, "error", "limit"),
    ("🔎🙂 how to cook rice 🍚", None, None),
    ("كيف أتعلم البرمجة بسرعة؟", None, None),
    *[(s, None, None) for s in INJECTIONS],
]


@pytest.mark.parametrize("text, kind, fragment", COMPARE_CASES)
def test_compare_page_with_hostile_query(text, kind, fragment, page_env):
    at = _page("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25", "minilm"]).run()
    at.text_input(key="compare.query").input(text).run()
    assert not at.exception, at.exception
    if kind is not None:
        messages = [e.value for e in getattr(at, kind)]
        assert any(fragment in m for m in messages), messages
        assert not at.dataframe or all("question" not in df.value.columns for df in at.dataframe)
        return
    assert not at.error, [e.value for e in at.error]
    assert at.dataframe[0].value["system"].tolist() == ["bm25", "minilm"]  # the per-system summary
    # the query is never echoed as markdown or HTML
    rendered = " ".join(m.value for m in at.markdown)
    assert text not in rendered and "<script>" not in rendered


def test_annotate_stores_and_shows_injection_strings_verbatim(page_env, monkeypatch, tmp_path):
    """A typed injection query is queued, shown with st.text (escaped), labelled, stored verbatim."""
    from core.judging.judgments import JudgmentStore
    from tests.panel_driver import label_op, panel_data, send

    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'j.sqlite'}")
    evil = "<script>alert(1)</script> '); DROP TABLE judgments;-- **bold** $x$ python"
    at = _page("pages/4_Annotate.py").run()
    at.text_input(key="annotate.annotator").input("Mallory <b>").run()
    at.multiselect(key="annotate.systems").set_value(["bm25"]).run()
    at.text_input(key="annotate.typed").input(evil).run()
    next(b for b in at.button if b.label == "Add typed query").click().run()
    assert not at.exception, at.exception
    data = panel_data(at, "annotate.panel")  # the panel writes texts with textContent only
    assert [i["query"] for i in data["items"]][0] == evil
    assert all(evil not in m.value and "<script>" not in m.value for m in at.markdown)
    send(at, "annotate.panel", "ops", {"ops": [label_op(data["items"][0], 1)]})
    assert not at.exception, at.exception
    store = JudgmentStore(f"sqlite:///{tmp_path / 'j.sqlite'}")
    (judgment,) = store.judgments("qqp-bimpm")
    assert judgment.query == evil and judgment.annotator == "Mallory <b>" and judgment.label == 1
    store.close()
