"""Each attack of a judging service put on a lab's network, run against a real server: ``streamlit run serve.py``
(what ``make run`` serves) where the attacker needs no token, the commit endpoint under uvicorn in this process
where the attack needs a panel's token (the token of a panel the Annotate page rendered here). SECURITY.md lists
these tests, what each attack is expected to do and what it did (``test_security_md_lists_every_attack``)."""
from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request

import pytest

from tests.attack_servers import GB, MB, endpoint, flood, one_json_line, post, reset_peak, rss, studio, wait_healthy
from tests.conftest import ROOT, run_main
from tests.panel_driver import panel_data
from ui import label_endpoint as le

__all__ = ["endpoint", "studio"]  # the servers' fixtures, used by name
ESC_TEXT = "how do I cook rice \x1b]0;pwned\x07 \x1b[31mnow\x1b[0m ?"
MARKUP_IDS = ("q1![p](http://127.0.0.1:9/t.png)", "q2`**b**`<b>x</b>", "q3:red[x]$y$")


# ----------------------------------------------------------------------------- memory without a token
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_1gb_body_without_a_token_is_refused_before_it_is_read(studio, chunked):
    port, proc, log = studio
    assert post(port, b'{"ops": []}')[0] == 401  # warm: the route and its imports are loaded
    reset_peak(proc.pid)
    before = rss(proc.pid, "VmRSS")
    answer, sent = flood(port, {}, GB, chunked)
    growth = rss(proc.pid, "VmHWM") - before
    assert growth < 50 * MB, f"the server's peak memory grew by {growth / MB:.0f} MB"
    assert sent < GB, "the server read the whole body"
    if answer:  # the answer may be lost to the connection's reset; when it arrives it is the one line
        assert "not valid" in one_json_line(answer, 401)["error"]
    assert proc.poll() is None
    wait_healthy(f"http://127.0.0.1:{port}")


def test_a_1gb_body_with_a_token_stops_at_the_cap(endpoint):
    token = le.register("h-flood", "ann@lab", "free|x|ann@lab", lambda raw: ([], {}))
    reset_peak(os.getpid())
    before = rss(os.getpid(), "VmRSS")
    answer, sent = flood(endpoint, {le.TOKEN_HEADER: token}, GB, chunked=True)
    growth = rss(os.getpid(), "VmHWM") - before
    assert growth < 50 * MB, f"the endpoint's process grew by {growth / MB:.0f} MB"
    assert sent < GB and "over" in one_json_line(answer, 413)["error"]


def test_an_oversized_content_length_is_refused_before_the_body(endpoint):
    token = le.register("h-length", "ann@lab", "free|x|ann@lab", lambda raw: ([], {}))
    answer, sent = flood(endpoint, {le.TOKEN_HEADER: token}, GB, chunked=False)
    assert "over" in one_json_line(answer, 413)["error"] and sent < GB


# ----------------------------------------------------------------------------- deep JSON
def test_deep_json_is_one_line_and_no_traceback(studio, endpoint):
    port, proc, log = studio
    status, body = post(port, b"[" * 100_000)
    assert status == 401 and body.count(b"\n") == 0  # no token: refused before the body is read
    token = le.register("h-deep", "ann@lab", "free|x|ann@lab", lambda raw: ([], {}))
    status, body = post(endpoint, b"[" * 100_000, token)
    assert status == 400 and "too deep" in json.loads(body)["error"] and body.count(b"\n") == 0
    assert "Traceback" not in log.read_text(errors="replace")


# ----------------------------------------------------------------------------- the server decides what a label is about
@pytest.fixture
def annotate_panel(built, endpoint, monkeypatch, tmp_path):
    """The Annotate page rendered for annotator Ann on the tiny fixture: (the panel's data, the store)."""
    from core.judging.judgments import JudgmentStore
    from tests.conftest import app_test

    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    monkeypatch.setenv("QRS_DB_URL", url)
    at = app_test("pages/4_Annotate.py")
    at.run()
    at.text_input(key="annotate.annotator").input("Ann").run()
    next(b for b in at.button if b.label == "Add dataset queries").click().run()
    assert not at.exception, at.exception
    data = panel_data(at, "annotate.panel")
    assert data["endpoint"]["token"] and data["items"]
    store = JudgmentStore(url)
    yield data, store
    store.close()


def _ops(*ops: dict) -> bytes:
    return json.dumps({"ops": [{"kind": "label", "label": 2, **op} for op in ops]}).encode()


def test_forged_refs_new_line_ids_and_other_names_change_nothing(annotate_panel, endpoint):
    from core.data.datasets import load_dataset
    from core.data.trec import qrels_text

    data, store = annotate_panel
    token, shown = data["endpoint"]["token"], data["items"][0]
    assert "ref" not in shown  # what the server commits an item as stays on the server
    ds = load_dataset("qqp-bimpm")
    unseen = next(d for d in ds.corpus if d not in {i["id"] for i in data["items"]})
    group = shown["group"]
    status, body = post(endpoint, _ops(
        {"key": "k-unseen", "uid": f"{group}|{unseen}", "item": unseen, "group": group,
         "ref": {"query": "a query nobody asked", "qid": None, "doc": unseen}},
        {"key": "k-newline", "uid": "q00002\nq00003|" + unseen, "item": unseen, "group": "q00002\nq00003",
         "ref": {"query": "x", "qid": "q00002 0 q00003 2\nq00004", "doc": unseen}}), token)
    assert status == 200 and json.loads(body) == {"acked": [], "failed": {}}
    assert store.judgments(ds.name) == []  # 0 rows: never-rendered items wait in the browser
    status, body = post(endpoint, _ops(
        {"key": "k-forged", "uid": shown["uid"], "item": unseen, "group": "forged", "annotator": "Eve",
         "ref": {"query": "a query nobody asked", "qid": "q00002\nq00003", "doc": unseen}}), token)
    assert status == 200 and json.loads(body)["acked"] == ["k-forged"]
    (row,) = store.judgments(ds.name)
    assert (row.annotator, row.doc_id, row.label) == ("Ann", shown["id"], 2)  # the rendered item, the token's name
    assert row.query != "a query nobody asked" and "\n" not in (row.query_id or "")
    lines = qrels_text(store.qrels(ds.name)).splitlines()
    assert len(lines) == 1 and len(lines[0].split()) == 4


def test_an_imported_id_with_whitespace_or_control_characters_is_refused(fresh_var, tmp_path):
    from core.data.imports import import_dataset
    from core.errors import DataFormatError

    for bad in ("q00002\nq00003", "q 1", "q\x1b1"):
        root = tmp_path / f"beir{len(bad)}{bad.isprintable()}"
        (root / "qrels").mkdir(parents=True)
        (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "a document"}) + "\n")
        (root / "queries.jsonl").write_text(json.dumps({"_id": bad, "text": "a query"}) + "\n")
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
        with pytest.raises(DataFormatError, match="no whitespace"):
            import_dataset("beir", root, "bad-ids")
    assert not (fresh_var / "datasets" / "user" / "bad-ids").exists()


# ----------------------------------------------------------------------------- tokens tied to the login
def test_the_token_is_refused_after_log_out(annotate_panel, endpoint, monkeypatch):
    import streamlit as st

    from ui.auth import log_out

    data, _ = annotate_panel
    token = data["endpoint"]["token"]
    assert post(endpoint, b'{"ops": []}', token)[0] == 200
    monkeypatch.setattr(st, "logout", lambda: None)  # Streamlit's own end of the login needs a script run
    log_out("Ann")
    status, body = post(endpoint, b'{"ops": []}', token)
    assert status == 401 and "logged out" in json.loads(body)["error"]
    with pytest.raises(le.TokenError, match="expired"):
        le.verify(le.register("h-ttl", "Bob", "s", lambda raw: ([], {})), now=time.time() + le.TTL_S + 1)


def test_the_log_out_button_revokes_the_users_tokens(monkeypatch, fresh_var):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.campaign_env import OIDC_SECRETS

    ended: list[bool] = []
    monkeypatch.setattr(st, "logout", lambda: ended.append(True))  # Streamlit's own end of the login
    at = AppTest.from_string("from ui.auth import gate\ngate(show_user=True)\n", default_timeout=60)
    at.secrets["auth"] = OIDC_SECRETS
    at.user = {"is_logged_in": True, "email": "Ann@Lab", "sub": "u-ann"}
    at.run()
    mine = le.register("h-ann", "ann@lab", "free|x|ann@lab", lambda raw: ([], {}))
    theirs = le.register("h-bob", "bob@lab", "free|x|bob@lab", lambda raw: ([], {}))
    next(b for b in at.sidebar.button if b.label == "Log out").click().run()
    assert not at.exception and ended == [True]
    with pytest.raises(le.TokenError, match="logged out"):
        le.verify(mine)
    assert le.verify(theirs).annotator == "bob@lab"  # only the user who logged out


# ----------------------------------------------------------------------------- blind judging
@pytest.mark.parametrize("who, chooses", [("ann@lab", False), ("olivia@lab", True), ("rita@lab", True)])
def test_only_owners_and_researchers_choose_the_pool_systems(built, monkeypatch, tmp_path, who, chooses):
    from tests.conftest import app_test

    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'j.sqlite'}")
    monkeypatch.setenv("QRS_TRUSTED_HEADER", "X-Forwarded-User")
    monkeypatch.setenv("QRS_OWNERS", "olivia@lab")
    monkeypatch.setenv("QRS_RESEARCHERS", "rita@lab")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {"X-Forwarded-User": who})
    at = app_test("pages/4_Annotate.py")
    at.run()
    assert not at.exception, at.exception
    assert bool([m for m in at.multiselect if m.label == "Pool systems"]) is chooses
    assert bool([c for c in at.caption if "Blind judging" in c.value]) is not chooses
    next(b for b in at.button if b.label == "Add dataset queries").click().run()
    assert not at.exception and panel_data(at, "annotate.panel")["items"]  # the annotator still gets a pool


# ----------------------------------------------------------------------------- exports, pages, terminal, hosts
def test_every_csv_export_escapes_formulas():
    import csv
    import io

    from core.analysis.error_analysis import rows_to_csv

    text = rows_to_csv([{"query_id": "q1", "query": "=1+1", "bm25": 0.5},
                        {"query_id": "@SUM(A1)", "query": "-2+3", "bm25": -0.25}])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["query"] for r in rows] == ["'=1+1", "'-2+3"] and rows[1]["query_id"] == "'@SUM(A1)"
    assert rows[1]["bm25"] == "-0.25"  # a number stays a number
    writers = [str(p.relative_to(ROOT)) for d in ("core", "ui", "pages") for p in (ROOT / d).rglob("*.py")
               if re.search(r"csv\.(DictWriter|writer)\(", p.read_text(encoding="utf-8"))]
    assert writers == ["core/data/cells.py"], writers  # one escaping function: every CSV goes through it


@pytest.fixture
def markup_dataset(fresh_var, tmp_path):
    """An imported BEIR dataset whose ids hold Markdown, HTML and directives, with BM25 built."""
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.retrieval import bm25

    root = tmp_path / "markup"
    (root / "qrels").mkdir(parents=True)
    texts = ["how do I cook rice ?", "how do I cook pasta ?", "how do I cook beans ?"]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}{q}", "text": t}) + "\n"
                                               for i, (q, t) in enumerate(zip(MARKUP_IDS, texts))))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t + " fast"}) + "\n"
                                                for q, t in zip(MARKUP_IDS, texts)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\td{i}{q}\t1\n" for i, q in enumerate(MARKUP_IDS)))
    ds = load_dataset(import_dataset("beir", root, "markup"))
    bm25.build(ds)
    return ds


def _markdown_shown(at) -> str:
    return " ".join(e.value for kind in ("markdown", "caption", "warning", "info", "success", "error")
                    for e in getattr(at, kind))


@pytest.mark.parametrize("page", ["pages/1_Compare.py", "pages/3_Keywords.py"])
def test_ids_holding_markdown_are_shown_literally(markup_dataset, page):
    from tests.conftest import app_test

    qid = MARKUP_IDS[0]
    at = app_test(page)
    at.session_state["dataset"] = markup_dataset.name
    at.session_state["compare.pending_qid"] = qid
    at.query_params["qid"] = qid
    at.run()
    assert not at.exception, at.exception
    shown = _markdown_shown(at)
    assert "q1\\!\\[p\\]\\(http" in shown  # the id is on the page, escaped
    assert qid not in shown and "![" not in shown and "](http" not in shown  # never as an image


def test_campaign_query_ids_holding_markdown_are_shown_literally(markup_dataset, monkeypatch, tmp_path):
    from core.judging.campaign_pool import items_from_pool
    from core.judging.campaign_records import CampaignSpec, QuerySet
    from core.judging.campaigns import CampaignStore
    from tests.campaign_env import OIDC_SECRETS
    from tests.conftest import app_test

    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'j.sqlite'}")
    monkeypatch.setenv("QRS_OWNERS", "olivia@lab")
    ds, qid = markup_dataset, MARKUP_IDS[0]
    cs = CampaignStore()
    cs.create("olivia@lab", CampaignSpec("team", ds.name, QuerySet("list", ids=(qid,)), ("given",), 2, 2,
                                         ("olivia@lab",), ("ann", "bob")), items_from_pool(ds, {qid: list(ds.corpus)}))
    for who, label in (("ann", 0), ("bob", 2)):  # a conflict: the Adjudicate tab names its query id
        cs.judge(who, "team", cs.queue(who, "team")[0].item_id, label)
    cs.close()
    at = app_test("pages/8_Campaigns.py")
    at.session_state["dataset"] = ds.name
    at.secrets["auth"] = OIDC_SECRETS
    at.user = {"is_logged_in": True, "email": "olivia@lab", "sub": "u-olivia"}
    at.run()
    assert not at.exception, at.exception
    shown = _markdown_shown(at)
    assert "q1\\!\\[p\\]\\(http" in shown and qid not in shown and "![" not in shown


def test_the_cli_prints_no_terminal_escapes(tmp_path):
    from core.judging.judgments import JudgmentStore

    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    store = JudgmentStore(url)
    for who, label in (("alice", 0), ("bob", 2)):
        store.set_label(who, "toy", ESC_TEXT, "d1", "a document \x1b[2J", label, query_id="q1")
    store.close()
    code, out, err = run_main("judgments", "agreement", "--dataset", "toy", "--db", url)
    assert code == 0 and "cook rice" in out and "]0;pwned" in out  # the text is there, its escapes are not
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out + err), repr(out)


def test_the_server_answers_only_allowed_hosts(studio):
    port, _, _ = studio
    assert post(port, b'{"ops": []}', host="rebound.example")[0] == 400
    assert post(port, b'{"ops": []}', host=f"localhost:{port}")[0] == 401  # reached the endpoint: no token
    request = urllib.request.Request(f"http://127.0.0.1:{port}/_stcore/health", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 (loopback)
    assert refused.value.code == 400


# ----------------------------------------------------------------------------- SECURITY.md
def test_security_md_lists_every_attack():
    """SECURITY.md's table names each test of this module once (and no other): attack, expected, observed."""
    tests = set(re.findall(r"^def (test_\w+)", (ROOT / "tests" / "test_attacks.py").read_text(), re.M))
    rows = re.findall(r"^\| `(test_\w+)` \|", (ROOT / "SECURITY.md").read_text(encoding="utf-8"), re.M)
    assert len(rows) == len(set(rows)) and set(rows) == tests - {"test_security_md_lists_every_attack"}, (
        sorted(tests - set(rows)), sorted(set(rows) - tests))
