"""Every page on every dataset kind, no exception box: the tiny QQP collection, a tiny candidate list (user/answers,
the shape of TrecQA), an imported BEIR folder (user/cqa) and an imported pairs file (user/pairs), with BM25, a
plugin that defines only ``retrieve`` (tests/user_system_env.py), a fusion of the two and, on the candidate list, a
TREC run file. The data, the plugin and the indexes are built once for the module."""
from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from tests.byod_env import BYOD
from tests.conftest import ROOT, TINY_DATA, app_test
from tests.user_system_env import TOY_MODULE, install_distribution

PAGES = sorted(path.name for path in (ROOT / "pages").glob("[0-9]_*.py"))
KINDS = {"collection": "qqp-bimpm", "candidate list": "user/answers", "BEIR folder": "user/cqa",
         "pairs file": "user/pairs"}
PLUGIN = "toy-overlap"
RUN = "my-run"


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """The four kinds imported in a private artifacts folder, BM25 built on each collection, the plugin installed and
    a run file added on the candidate list; everything undone after the module."""
    from core import registry
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.retrieval import bm25
    from core.user_systems import add_user_system

    root = tmp_path_factory.mktemp("kinds")
    site = root / "site"
    install_distribution(site, "toy-qrs-plugin", "toy_qrs_plugin", TOY_MODULE, "toy")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_VAR", str(root / "var"))
        mp.setenv("QRS_DATA", str(TINY_DATA))
        mp.syspath_prepend(str(site))
        importlib.invalidate_caches()
        pairs = root / "pairs.tsv"
        rows = (TINY_DATA / "qqp-bimpm" / "dev.tsv").read_text(encoding="utf-8").splitlines()[:80]
        pairs.write_text("".join("\t".join(r.split("\t")[:3]) + "\n" for r in rows), encoding="utf-8")
        import_dataset("beir", BYOD / "cqa", "cqa")
        import_dataset("candidates", BYOD / "answers.tsv", "answers")
        import_dataset("pairs", pairs, "pairs")
        answers = load_dataset(KINDS["candidate list"])
        rng = np.random.default_rng(0)
        run = root / "mine.trec"
        run.write_text("".join(f"{q} Q0 {d} {i} {float(s)!r} mine\n" for q, ids in answers.candidates.items()
                               for i, (d, s) in enumerate(zip(ids, rng.normal(size=len(ids))), 1)), encoding="utf-8")
        registry.refresh()
        add_user_system(RUN, "run", run, answers.name)
        for name in KINDS.values():
            ds = load_dataset(name)
            if not ds.candidates:
                bm25.build(ds)
        yield KINDS
    sys.modules.pop("toy_qrs_plugin", None)
    registry.refresh()


def _query_id(name: str) -> str:
    from core.data.datasets import load_dataset

    ds = load_dataset(name)
    return next(q for q in ds.queries if not ds.candidates or len(ds.candidates.get(q, ())) >= 2)


def _params(page: str, name: str) -> dict[str, str]:
    """The URL a user would open the page with: a dataset question, and on Compare the systems and a fused column."""
    params = {"dataset": name}
    if page.startswith(("1_", "3_")):
        params["qid"] = _query_id(name)
    if page.startswith("1_"):
        params["systems"] = ",".join(["bm25", PLUGIN] + ([RUN] if name == KINDS["candidate list"] else []))
        params["fuse"] = f"bm25+{PLUGIN}:rrf"
    return params


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("page", PAGES)
def test_every_page_on_every_dataset_kind(kinds, page, kind):
    name = kinds[kind]
    at = app_test("app.py" if page.startswith("0_") else f"pages/{page}")  # Home is app.py's navigation
    at.session_state["dataset"] = name
    for key, value in _params(page, name).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, f"{page} on {kind} ({name}): {[e.message for e in at.exception]}"
    if page.startswith("1_"):  # Compare ranked the question with every system, the fused column included
        summary = at.dataframe[0].value
        assert {"bm25", PLUGIN, "fusion@bm25+toy-overlap:rrf"} <= set(summary["system"]), summary
        assert set(summary["status"]) == {"ok"}, summary
    if page.startswith("3_"):  # Keywords scored the question against its first candidate
        assert at.metric and not at.error, [e.value for e in at.error]


def test_normal_states_are_not_errors(kinds):
    """Unbuilt systems marked and never picked by "select all" (at most the stated eight); a candidate list speaks of
    answers; a query none of whose words BM25 knows says so instead of an empty column."""
    from ui.compare_view import MAX_SYSTEMS
    from ui.system_picker import NOT_BUILT

    at = app_test("pages/1_Compare.py")
    at.session_state["dataset"] = kinds["collection"]
    at.query_params["dataset"] = kinds["collection"]
    at.run()
    picker = at.multiselect(key="compare.systems")
    marked = [o for o in picker.options if o.endswith(NOT_BUILT)]
    assert marked and not any(o.startswith(("bm25", PLUGIN)) for o in marked), picker.options
    at.button(key="compare.select_ready").click().run()
    picked = at.multiselect(key="compare.systems").value
    assert "bm25" in picked and PLUGIN in picked and len(picked) <= MAX_SYSTEMS
    assert not any(f"{name}{NOT_BUILT}".startswith(o) for name in picked for o in marked)
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    at.text_input(key="compare.query").input("如何停止我的抑郁症").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("bm25 found nothing" in i.value for i in at.info), [i.value for i in at.info]

    listed = app_test("pages/1_Compare.py")
    for key, value in _params("1_Compare.py", kinds["candidate list"]).items():
        listed.query_params[key] = value
    listed.run()
    assert not listed.exception
    text = " ".join(c.value for c in listed.caption) + " ".join(e.label for e in listed.expander)
    assert "Known answers" in text and "ignore_identical_ids" not in text and "paraphrase" not in text.lower()


def test_compare_steps_back_and_forward_through_its_queries(kinds):
    """Each query is its own link (a browser history entry); Back and Forward rerun the page with that entry's URL,
    and the page shows that query again with the systems of that link."""
    at = app_test("pages/1_Compare.py")
    at.session_state["dataset"] = kinds["collection"]
    at.run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    links = []
    for text in ("How do I learn Python fast ?", "How can I stop my depression ?"):
        at.text_input(key="compare.query").input(text).run()
        assert not at.exception
        links.append(at.query_params.to_dict() if hasattr(at.query_params, "to_dict") else dict(at.query_params))
    assert links[0]["q"] != links[1]["q"]
    for link, text in ((links[0], "How do I learn Python fast ?"), (links[1], "How can I stop my depression ?")):
        at.query_params.clear()
        at.query_params.update(link)  # what Back (then Forward) hands the page
        at.run()
        assert not at.exception
        assert at.text_input(key="compare.query").value == text
        assert at.multiselect(key="compare.systems").value == ["bm25"]
