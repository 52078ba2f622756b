"""Campaigns in the pages (AppTest): the login page for visitors, blind queues judged through the panel, owners'
adjudication, who sees what, the trusted-header mode, undo, Error Analysis rescored at once with PPI estimates, the
judging budget, a login through a real OIDC provider, and a database that is not ours refused in one line."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3

import pytest

from core.judging.campaigns import CampaignStore
from tests.campaign_env import OWNER, TEAM, app_page, page_env  # noqa: F401  (page_env: a fixture)
from tests.oidc_server import oidc_provider  # noqa: F401  (session fixture)
from tests.panel_driver import label_op, panel_data, send, undo_op

PANEL = "campaign.panel.team"


def test_visitor_not_logged_in_sees_the_login_page_and_nothing_else(page_env):
    for page in ("4_Annotate.py", "8_Campaigns.py"):
        at = app_page(page, None).run()
        assert not at.exception
        assert [b.label for b in at.button] == ["Log in"]
        assert not at.text_input and not at.dataframe and not at.tabs and [t.value for t in at.title] == [
            "Question Retrieval Studio"]
    assert page_env.labels(OWNER, "team") == []


def test_logged_in_annotator_judges_their_queue_and_cannot_reach_others_items(page_env):
    cs = page_env
    at = app_page("4_Annotate.py", {"is_logged_in": True, "email": "ann", "sub": "u-ann"}).run()
    assert not at.exception
    assert not [w for w in at.text_input if w.key == "annotate.annotator"]  # no free-text name with login
    assert "ann" in [t.value for t in at.text]
    at.radio(key="annotate.work").set_value("team").run()
    first = cs.queue("ann", "team")[0]
    data = panel_data(at, PANEL)
    assert data["start"] == str(first.item_id) and data["can_cant"]
    assert first.doc_text in [i["text"] for i in data["items"]] and "given" not in json.dumps(data)  # blind
    item = next(i for i in data["items"] if i["id"] == first.item_id)
    send(at, PANEL, "ops", {"ops": [label_op(item, 2, rationale="same intent")]})
    assert not at.exception
    got = cs.item("ann", "team", first.item_id)
    assert (got.label, got.rationale) == (2, "same intent")
    # can't judge with a reason; without one it is refused with one line and nothing changes
    second = next(i for i in data["items"] if i["id"] == cs.next_item("ann", "team").item_id)
    empty = {**label_op(second, 0), "kind": "cant", "reason": " "}
    send(at, PANEL, "ops", {"ops": [empty, {**label_op(second, 0), "kind": "cant", "reason": "unreadable"}]})
    assert "reason is required" in panel_data(at, PANEL)["failed"][empty["key"]]
    assert cs.item("ann", "team", second["id"]).cant_judge == "unreadable"
    # an item assigned to someone else, by URL: one line, nothing shown or changed
    foreign = next(it for it in cs.queue("bob", "team") if it.item_id not in {q.item_id for q in cs.queue("ann", "team")})
    before = _snapshot_team(cs)
    at.query_params["item"] = str(foreign.item_id)
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "is not assigned to ann" in at.error[0].value
    assert not [n for n in at._tree if getattr(n, "type", None) == "bidi_component"]
    # an op naming that item, sent by a tampered browser, is refused too
    at.query_params.pop("item")
    at.run()
    forged = {**label_op(item, 2), "uid": str(foreign.item_id), "item": foreign.item_id}
    send(at, PANEL, "ops", {"ops": [forged]})
    data = panel_data(at, PANEL)  # never rendered for ann: not applied (it waits in a tampered browser)
    assert forged["key"] not in data["acked"] and forged["key"] not in data["failed"]
    assert _snapshot_team(cs) == before
    renamed = {**label_op(item, 2), "item": foreign.item_id}  # a shown uid naming another item: the shown one
    send(at, PANEL, "ops", {"ops": [renamed]})
    assert renamed["key"] in panel_data(at, PANEL)["acked"] and cs.item("ann", "team", item["id"]).label == 2
    assert [x for x in _snapshot_team(cs) if x[0] == foreign.item_id] == [
        x for x in before if x[0] == foreign.item_id]


def _snapshot_team(cs: CampaignStore) -> tuple:
    return tuple(sorted((l.item_id, l.annotator, l.label, l.reason) for l in cs.labels(OWNER, "team")))


def test_campaigns_page_owner_adjudicates_conflicts_and_non_owner_is_refused(page_env):
    cs = page_env
    for who, label in (("ann", 2), ("bob", 0), ("cat", 1)):
        while (it := cs.next_item(who, "team")) is not None:
            cs.judge(who, "team", it.item_id, label)
    at = app_page("8_Campaigns.py", {"is_logged_in": True, "email": "bob"}).run()
    assert not at.exception and "for the lab's owners and researchers" in at.info[0].value and not at.tabs
    at = app_page("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run()
    assert not at.exception
    conflicts = cs.conflicts(OWNER, "team")
    assert len(conflicts) == 6  # every item: two different labels
    target = conflicts[0].item_id
    at.selectbox(key=f"campaigns.decide.{target}").set_value(1).run()
    at.button(key=f"campaigns.save.{target}").click().run()
    assert not at.exception
    assert {a.item_id: a.label for a in cs.adjudications(OWNER, "team")} == {target: 1}
    measures = [m for df in at.dataframe if "measure" in df.value for m in df.value["measure"].tolist()]
    assert "Krippendorff's α (nominal)" in measures and "Cohen's κ ann / bob" in measures
    assert any("Rule majority: the most frequent label" in c.value for c in at.caption)


def test_adjudication_starts_undecided_filters_and_shows_saved_rationales(page_env):
    cs = page_env
    for who, label in (("ann", 2), ("bob", 0), ("cat", 1)):
        while (it := cs.next_item(who, "team")) is not None:
            cs.judge(who, "team", it.item_id, label, rationale=f"{who} thinks {label}")
    at = app_page("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run()
    conflicts = [k.item_id for k in cs.conflicts(OWNER, "team")]
    first, second = conflicts[:2]
    assert at.radio(key="campaigns.adjudicate.filter").value == "undecided"
    assert all(at.selectbox(key=f"campaigns.decide.{i}").value is None for i in conflicts)  # nothing preselected
    shown = [df.value for df in at.dataframe if "rationale" in df.value.columns]
    assert shown and set(shown[0]["rationale"]) <= {f"{w} thinks {v}" for w, v in (("ann", 2), ("bob", 0), ("cat", 1))}
    at.button(key=f"campaigns.save.{first}").click().run()  # Save without a choice: refused, nothing stored
    assert not at.exception and len(at.error) == 1 and "choose a label" in at.error[0].value
    assert cs.adjudications(OWNER, "team") == []
    at.selectbox(key=f"campaigns.decide.{first}").set_value(2)
    at.text_input(key=f"campaigns.why.{first}").input("ann is right: same intent")
    at.button(key=f"campaigns.save.{first}").click().run()
    assert [(a.item_id, a.label, a.rationale) for a in cs.adjudications(OWNER, "team")] == [
        (first, 2, "ann is right: same intent")]
    # the decided item leaves the "undecided" list at once; the count is current in the same run
    assert not [w for w in at.selectbox if w.key == f"campaigns.decide.{first}"]
    assert any(f"{len(conflicts) - 1}" in o for o in [at.radio(key="campaigns.adjudicate.filter").options[0]])
    assert any(c.value.endswith("1 decided.") for c in at.caption)
    at.radio(key="campaigns.adjudicate.filter").set_value("all").run()
    assert at.selectbox(key=f"campaigns.decide.{first}").value == 2
    assert at.selectbox(key=f"campaigns.decide.{second}").value is None
    assert "adjudicated: 2" in [c.value for c in at.caption] and "ann is right: same intent" in [t.value for t in at.text]
    # Export: the threshold only for the mean rule
    assert not [w for w in at.number_input if w.key == "campaigns.threshold"]
    at.selectbox(key="campaigns.rule").set_value("mean").run()
    assert [w.key for w in at.number_input if w.key == "campaigns.threshold"] == ["campaigns.threshold"]


def test_annotator_sees_annotate_only_researchers_and_owners_see_the_rankings(page_env, monkeypatch):
    from types import SimpleNamespace

    from ui.nav import visible_pages

    monkeypatch.setenv("QRS_RESEARCHERS", "Rita@Lab.Example")
    for page in ("1_Compare.py", "5_Error_Analysis.py", "7_Case_Studies.py", "3_Keywords.py", "2_Layers.py"):
        at = app_page(page, {"is_logged_in": True, "email": "Ann"}).run()  # an annotator
        assert not at.exception and "for the lab's owners and researchers" in at.info[0].value, page
        assert not at.dataframe and not at.text_input and not at.multiselect, page
    at = app_page("5_Error_Analysis.py", {"is_logged_in": True, "email": "rita@lab.example"}).run()
    assert not at.exception and not [i for i in at.info if "owners and researchers" in i.value]
    who = lambda name, owner=False, researcher=False, mode="oidc": SimpleNamespace(  # noqa: E731
        authenticated=name is not None, sees_rankings=mode == "none" or owner or researcher)
    assert [p.title for p in visible_pages(who("ann"))] == ["Annotate"]
    assert visible_pages(who(None)) == []
    assert len(visible_pages(who("rita", researcher=True))) == len(visible_pages(who("x", mode="none"))) > 5


def test_trusted_header_mode_only_when_configured(page_env, monkeypatch):
    at = app_page("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setenv("QRS_TRUSTED_HEADER", "X-Forwarded-User")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {"X-Forwarded-User": "cat"})
    at.run()
    assert not at.exception and "cat" in [t.value for t in at.text]
    at = app_page("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {})
    at.run()
    assert len(at.error) == 1 and "no X-Forwarded-User header" in at.error[0].value and not at.text_input
    monkeypatch.delenv("QRS_TRUSTED_HEADER")
    at = app_page("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {"X-Forwarded-User": "mallory"})  # not configured
    at.run()
    assert not at.exception and at.text_input(key="annotate.annotator").value == ""


def test_login_through_a_real_oidc_provider_sets_the_streamlit_user(oidc_provider, tmp_path):
    """Streamlit's own /auth/login -> the provider's authorization form -> /oauth2callback, over HTTP:
    Authlib and the provider agree, and the app sets its signed identity cookie."""
    import subprocess
    import sys

    import httpx

    from tests.conftest import ROOT, TINY_DATA
    from tests.e2e.conftest import free_port, stop, wait_healthy

    port = free_port()
    app = f"http://127.0.0.1:{port}"
    secrets = oidc_provider.secrets_toml(app, [OWNER], tmp_path / "secrets.toml")
    oidc_provider.add_user("u-ann", email="ann@lab.example", name="Ann")
    env = {**os.environ, "QRS_DATA": str(TINY_DATA), "QRS_VAR": str(tmp_path / "var"), "QRS_AUTOBUILD": "0",
           "QRS_DB_URL": f"sqlite:///{tmp_path / 'j.sqlite'}"}
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address",
         "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none", "--browser.gatherUsageStats",
         "false", "--secrets.files", str(secrets)],
        cwd=ROOT, env=env, stdout=(tmp_path / "streamlit.log").open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_healthy(app, server)
        token = subprocess.run(
            [sys.executable, "-c", "import sys; from streamlit import config; config.set_option('secrets.files', "
             "[sys.argv[1]]); from streamlit.user_info import encode_provider_token; "
             "print(encode_provider_token('default'))", str(secrets)],
            capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
        with httpx.Client(timeout=30) as client:
            to_provider = client.get(f"{app}/auth/login", params={"provider": token})
            assert to_provider.status_code in (302, 303, 307), to_provider.text[:300]
            authorize = to_provider.headers["location"]
            assert authorize.startswith(oidc_provider.url)
            back = client.post(authorize, data={"sub": "u-ann"})
            assert back.status_code in (302, 303) and back.headers["location"].startswith(f"{app}/oauth2callback")
            home = client.get(back.headers["location"])
            assert home.status_code in (302, 303, 307), home.text[:300]
            assert any(name.startswith("_streamlit_user") for name in client.cookies), dict(client.cookies)
    finally:
        stop(server)


def test_campaign_qrels_are_rescored_on_error_analysis_at_once(page_env):
    """Judge, then rescore: the owner picks the campaign as the label source on Error Analysis;
    its qrels (majority rule) score the systems at once, with judged@k per system."""
    cs = page_env
    for who in TEAM:
        while (it := cs.next_item(who, "team")) is not None:
            cs.judge(who, "team", it.item_id, 2 if it.doc_id.endswith("0") or who == "ann" else 1)
    qrels, _ = cs.qrels(OWNER, "team", "majority")
    assert qrels
    at = app_page("5_Error_Analysis.py", {"is_logged_in": True, "email": OWNER})
    at.run()
    assert not at.exception, at.exception
    at.selectbox(key="ea.campaign").set_value("team").run()
    assert not at.exception, at.exception
    assert any("campaign team, majority rule" in c.value for c in at.caption), [c.value for c in at.caption]
    shown = [df for df in at.dataframe if any(str(c).startswith("judged@") for c in df.value.columns)]
    assert not shown, "tabs are lazy: the Unjudged tab is not computed while Per query is open"
    at.session_state["ea.tab"] = "Unjudged"
    at.run()
    judged = [df.value for df in at.dataframe if any(str(c).startswith("judged@") for c in df.value.columns)]
    assert judged and (judged[0]["top-k items"] >= 0).all()


def test_campaign_mode_undo_on_the_page_and_an_empty_queue_names_its_owner(page_env):
    cs = page_env
    at = app_page("4_Annotate.py", {"is_logged_in": True, "email": "ann"}).run()
    at.radio(key="annotate.work").set_value("team").run()
    queue = cs.queue("ann", "team")
    items = panel_data(at, PANEL)["items"]
    assert [i["id"] for i in items] == [q.item_id for q in queue]  # the whole queue is in the browser
    ops = [label_op(items[0], 2), label_op(items[1], 1)]
    send(at, PANEL, "ops", {"ops": ops})
    assert [cs.item("ann", "team", q.item_id).label for q in queue[:3]] == [2, 1, None]
    data = panel_data(at, PANEL)
    assert data["start"] == str(queue[2].item_id) and set(data["acked"]) == {o["key"] for o in ops}
    relabel, undo = label_op(items[1], 0), undo_op(items[1])
    send(at, PANEL, "ops", {"ops": [relabel, undo]})
    send(at, PANEL, "ops", {"ops": [undo]})  # resent: still one undo
    assert not at.exception and cs.item("ann", "team", queue[1].item_id).label == 1
    send(at, PANEL, "ops", {"ops": [undo_op(items[1]), undo_op(items[0])]})
    assert [cs.item("ann", "team", q.item_id).judged for q in queue[:2]] == [False, False]
    late = undo_op(items[0])
    send(at, PANEL, "ops", {"ops": [late]})  # nothing left to undo: refused with one line
    assert "nothing to undo" in panel_data(at, PANEL)["failed"][late["key"]]
    # someone in no campaign: the page says whose queue it is
    at = app_page("4_Annotate.py", {"is_logged_in": True, "email": "Zoe@Lab.Example"}).run()
    assert not at.exception and any("No judging campaign names zoe@lab.example" in t.value for t in at.text)


def test_annotate_keeps_the_typed_name_across_pages_and_shows_its_labels(page_env, monkeypatch):
    from core.judging.judgments import JudgmentStore

    monkeypatch.delenv("QRS_OWNERS", raising=False)
    store = JudgmentStore()
    try:
        store.set_label("ada", page_env.campaign("team").dataset, "some query", "d1", "some text", 2)
    finally:
        store.close()
    at = app_page("4_Annotate.py", {"is_logged_in": False})
    at.secrets.pop("auth")  # single-user mode: the name is typed
    at.run()
    at.text_input(key="annotate.annotator").input("ada").run()
    assert any(t.value.startswith("ada: 1 label(s)") for t in at.text)
    # another page runs in the same browser session: Streamlit drops the state of every widget that run did
    # not draw (AppTest runs one page file alone, so the other page shares this test's session state)
    other = app_page("7_Case_Studies.py", {"is_logged_in": False})
    other._session_state, other.session_state = at._session_state, at.session_state
    other.secrets.pop("auth")
    other.run()
    assert not other.exception and "annotate.annotator" not in at.session_state
    back = app_page("4_Annotate.py", {"is_logged_in": False})  # back on Annotate in the same session
    back._session_state, back.session_state = at._session_state, at.session_state
    back.secrets.pop("auth")
    at = back.run()
    assert not at.exception and at.text_input(key="annotate.annotator").value == "ada"
    assert any(t.value.startswith("ada: 1 label(s)") for t in at.text)


def test_error_analysis_shows_ppi_estimates_when_a_judge_labelled_the_campaign(page_env):
    """Humans only, judge only and the PPI estimate with its interval and label counts, per system."""
    from core.judging.auto_judge import pool_items, save_judge_labels

    cs = page_env
    items = pool_items(cs, OWNER, "team")
    first_query = items[0].query_id
    for who in TEAM:  # humans label the first query only; the judge labels everything
        while (it := cs.next_item(who, "team")) is not None and it.query_id == first_query:
            cs.judge(who, "team", it.item_id, 2)
    save_judge_labels(cs, OWNER, "team", "judge:test", [(it.item_id, 0.5, i % 3) for i, it in enumerate(items)])
    at = app_page("5_Error_Analysis.py", {"is_logged_in": True, "email": OWNER})
    at.run(timeout=600)  # a loaded machine: ranx and the runs are computed on the first view
    at.selectbox(key="ea.campaign").set_value("team").run(timeout=600)
    assert not at.exception, at.exception
    tables = [df.value for df in at.dataframe if "PPI (90% CI)" in df.value.columns]
    assert tables, [list(df.value.columns) for df in at.dataframe]
    table = tables[0]
    assert {"humans only", "judge only", "human labels", "judge labels"} <= set(table.columns)
    assert (table["judge labels"] == len(items)).all()
    assert any("Estimator: PPI" in c.value for c in at.caption)


def test_campaigns_page_shows_the_judging_budget(page_env):
    """The owner sets a budget and sees the labelling order and each comparison's interval widths."""
    from core.judging.auto_judge import pool_items, save_judge_labels

    cs = page_env
    items = pool_items(cs, OWNER, "team")
    save_judge_labels(cs, OWNER, "team", "judge:test", [(it.item_id, float(i % 5), i % 3) for i, it in enumerate(items)])
    at = app_page("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run(timeout=600)
    assert not at.exception, at.exception
    assert "Judging budget" in [h.value for h in at.subheader]
    assert any("Label next, in this order" in c.value for c in at.caption), [c.value for c in at.caption]
    assert any(df.value is not None and "width at budget" in df.value.columns for df in at.dataframe), [e.value for e in at.error]


@pytest.mark.parametrize("page", ["4_Annotate.py", "5_Error_Analysis.py", "8_Campaigns.py"])
def test_a_judging_page_on_a_database_that_is_not_ours_says_so_in_one_line_and_changes_nothing(page, tmp_path,
                                                                                              monkeypatch):
    """Annotate, Error Analysis and Campaigns open the judgment store the same way (``ui.render.page_judgment_store``):
    a database that is not ours is one line naming the file, the page stops there, and the file is left as it was."""
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{foreign}")
    monkeypatch.setenv("QRS_OWNERS", OWNER)
    at = app_page(page, {"is_logged_in": True, "email": OWNER}).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "not a Question Retrieval Studio judgments database" in errors[0], errors
    assert str(foreign) in errors[0] and "\n" not in errors[0]
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
