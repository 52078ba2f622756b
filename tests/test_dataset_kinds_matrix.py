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
