"""Judging campaigns (core.judging.campaigns) on SQLite and a real PostgreSQL (``db_url``): overlap 2 with
three annotators, server-side queues that resume, "can't judge", adjudication with history, exports
with the rule named, concurrent writers and claims, and authorisation through the store's API."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from core.judging.campaign_records import CampaignAuthError, CampaignError, CampaignSpec, ItemSpec, QuerySet
from core.judging.campaign_results import aggregate, export_filename
from core.judging.campaigns import CampaignStore
from core.data.trec import read_qrels as read_trec_qrels
from tests.panel_driver import label_op, panel_data, send, undo_op

PANEL = "campaign.panel.team"

OWNER = "olivia@lab"
TEAM = ("ann", "bob", "cat")
QUERIES = ("q1", "q2", "q3")
DOCS = ("d1", "d2")


def _items(queries=QUERIES, docs=DOCS) -> list[ItemSpec]:
    return [ItemSpec(q, f"query {q} text", d, f"doc {d} text", {"bm25": i + 1}) for q in queries
            for i, d in enumerate(docs)]


def _spec(name: str = "c1", annotators=TEAM, overlap: int = 2) -> CampaignSpec:
    return CampaignSpec(name, "toy", QuerySet("list", ids=QUERIES), ("bm25",), 2, overlap, (OWNER,), tuple(annotators),
                        guidelines="2 = same question")


@pytest.fixture
def cs(db_url: str):
    store = CampaignStore(db_url)
    yield store
    store.close()


@pytest.fixture
def camp(cs):
    cs.create(OWNER, _spec(), _items())
    return cs


def _snapshot(cs: CampaignStore) -> tuple:
    return (sorted((l.item_id, l.annotator, l.label, l.reason) for l in cs.labels(OWNER, "c1")),
            len(cs.history(OWNER, "c1")), sorted((a.item_id, a.label) for a in cs.adjudications(OWNER, "c1")))


def test_overlap_two_with_three_annotators_is_balanced_and_blind(camp):
    c = camp.campaign("c1")
    assert (c.items, c.queries, c.overlap, c.open, c.annotators, c.owners) == (6, 3, 2, False, TEAM, (OWNER,))
    queues = {a: camp.queue(a, "c1") for a in TEAM}
    assert {a: len(q) for a, q in queues.items()} == {"ann": 4, "bob": 4, "cat": 4}  # 2 queries x 2 docs each
    per_item: dict[int, list[str]] = {}
    for a, q in queues.items():
        for it in q:
            per_item.setdefault(it.item_id, []).append(a)
        # all documents of a query go to the same annotators
        assert len({it.query_id for it in q}) == 2
    assert sorted(len(v) for v in per_item.values()) == [2] * 6
    item = queues["ann"][0]
    assert not hasattr(item, "systems") and item.label is None and item.doc_text.startswith("doc ")
    assert camp.queue("zoe", "c1") == [] and camp.next_item("zoe", "c1") is None  # not named: nothing


def test_queue_is_server_side_and_resumes_in_another_session(db_url, camp):
    first = camp.next_item("ann", "c1")
    assert camp.judge("ann", "c1", first.item_id, 2, rationale="same intent").changed
    assert not camp.judge("ann", "c1", first.item_id, 2, rationale="same intent").changed  # re-submit: no-op
    other = CampaignStore(db_url)  # another browser / process
    try:
        nxt = other.next_item("ann", "c1")
        assert nxt.item_id != first.item_id and nxt.position > first.position
        again = other.item("ann", "c1", first.item_id)
        assert (again.label, again.rationale, again.judged) == (2, "same intent", True)
        assert other.own_progress("ann", "c1") == (1, 4)
    finally:
        other.close()


def test_cant_judge_needs_a_reason_and_counts_as_done(camp):
    it = camp.next_item("bob", "c1")
    with pytest.raises(CampaignError, match="reason is required"):
        camp.cant_judge("bob", "c1", it.item_id, "  ")
    assert camp.cant_judge("bob", "c1", it.item_id, "text is in Hindi", rationale="no idea").changed
    got = camp.item("bob", "c1", it.item_id)
    assert (got.label, got.cant_judge, got.judged) == (None, "text is in Hindi", True)
    assert camp.next_item("bob", "c1").item_id != it.item_id
    assert [h.action for h in camp.history(OWNER, "c1") if h.item_id == it.item_id] == ["cant_judge"]


def test_authorisation_through_the_store_api_changes_nothing(camp):
    mine = {it.item_id for it in camp.queue("ann", "c1")}
    not_mine = next(it.item_id for it in camp.queue("bob", "c1") if it.item_id not in mine)
    camp.judge("bob", "c1", not_mine, 1)
    before = _snapshot(camp)
    refusals = [
        (lambda: camp.judge("ann", "c1", not_mine, 2), "not assigned to ann"),
        (lambda: camp.cant_judge("ann", "c1", not_mine, "why"), "not assigned to ann"),
        (lambda: camp.judge("ann", "c1", not_mine, 0, annotator="bob"), "cannot write bob's label"),
        (lambda: camp.judge("ann", "c1", min(mine), 0, annotator="bob"), "cannot write bob's label"),
        (lambda: camp.judge("mallory", "c1", not_mine, 2), "not assigned to mallory"),
        (lambda: camp.item("ann", "c1", not_mine), "not assigned to ann"),
        (lambda: camp.adjudicate("ann", "c1", not_mine, 2), "not an owner"),
        (lambda: camp.assign("ann", "c1", "ann", ["q1"]), "not an owner"),
        (lambda: camp.set_guidelines("ann", "c1", "anything goes"), "not an owner"),
        (lambda: camp.labels("ann", "c1"), "not an owner"),
        (lambda: camp.progress("bob", "c1"), "not an owner"),
        (lambda: camp.qrels("cat", "c1"), "not an owner"),
        (lambda: camp.create("ann", _spec("c2"), _items()), "only an owner creates"),
    ]
    for call, message in refusals:
        with pytest.raises(CampaignAuthError, match=message) as err:
            call()
        assert "\n" not in str(err.value)
    for call, message in [(lambda: camp.judge("ann", "c1", min(mine), 3), "from 0 to 2"),
                          (lambda: camp.judge("ann", "c1", 10_000, 1), "no item"),
                          (lambda: camp.judge("ann", "nope", min(mine), 1), "unknown campaign 'nope'")]:
        with pytest.raises(CampaignError, match=message):
            call()
    assert _snapshot(camp) == before
    assert camp.campaign("c1").guidelines == "2 = same question"
    assert [c.name for c in camp.campaigns()] == ["c1"]


def test_create_validates_before_writing(cs):
    bad = [
        (_spec(overlap=4), "overlap 4 needs at least 4 annotators"),
        (_spec(overlap=0), "overlap must be"),
    ]
    for spec, message in bad:
        with pytest.raises(CampaignError, match=message):
            cs.create(OWNER, spec, _items())
    with pytest.raises(CampaignError, match="appears twice"):
        cs.create(OWNER, _spec(), _items() + _items()[:1])
    with pytest.raises(CampaignError, match="pool is empty"):
        cs.create(OWNER, _spec(), [])
    assert cs.campaigns() == []
    cs.create(OWNER, _spec(), _items())
    with pytest.raises(CampaignError, match="exists already"):
        cs.create(OWNER, _spec(), _items())


def _judge_all(cs: CampaignStore, who: str, label_of) -> None:
    while (it := cs.next_item(who, "c1")) is not None:
        cs.judge(who, "c1", it.item_id, label_of(who, it))


def test_conflicts_adjudication_and_exports_name_their_rule(camp, tmp_path):
    # ann says 2 everywhere, bob 0, cat 1: every item has two different labels
    _judge_all(camp, "ann", lambda w, it: 2)
    _judge_all(camp, "bob", lambda w, it: 0)
    _judge_all(camp, "cat", lambda w, it: 1 if it.doc_id == "d1" else 2)
    prog = camp.progress(OWNER, "c1")
    assert prog.complete == 6 and prog.annotators == {"ann": (4, 4), "bob": (4, 4), "cat": (4, 4)}
    assert prog.queries["q1"] == {"items": 2, "ratings": 4, "wanted": 4, "complete": 2}
    conflicts = camp.conflicts(OWNER, "c1")
    agreeing = {l.item_id for l in camp.labels(OWNER, "c1")} - {c.item_id for c in conflicts}
    assert all(len(set(c.labels.values())) == 2 for c in conflicts)
    for i in agreeing:  # only items whose labels agree are left out (ann and cat both 2 on d2)
        assert len({l.label for l in camp.labels(OWNER, "c1") if l.item_id == i}) == 1
    target = conflicts[0]
    assert camp.adjudicate(OWNER, "c1", target.item_id, 1, rationale="partly the same").changed
    assert camp.adjudicate(OWNER, "c1", target.item_id, 2).previous == 1
    assert [(h.action, h.label, h.previous_label, h.who) for h in camp.history(OWNER, "c1")
            if h.action == "adjudicate"] == [("adjudicate", 1, None, OWNER), ("adjudicate", 2, 1, OWNER)]
    assert next(c for c in camp.conflicts(OWNER, "c1") if c.item_id == target.item_id).adjudicated == 2

    maj = camp.export_qrels(OWNER, "c1", tmp_path, "majority")
    adj = camp.export_qrels(OWNER, "c1", tmp_path, "adjudicated")
    mean = camp.export_qrels(OWNER, "c1", tmp_path, "mean", threshold=1.5)
    assert [r.path.name for r in (maj, adj, mean)] == ["c1.majority.qrels", "c1.adjudicated.qrels", "c1.mean-ge-1.5.qrels"]
    q_maj, q_adj, q_mean = (read_trec_qrels(r.path) for r in (maj, adj, mean))
    assert maj.pairs == 6 and maj.queries == 3 and maj.skipped == 0
    tq, td = target.query_id, target.doc_id
    assert q_adj[tq][td] == 2 and q_maj[tq][td] == min(target.labels.values())  # a tie goes to the lower label
    assert set(q_mean[tq].values()) <= {0, 1}


def test_aggregate_rules_by_hand():
    assert aggregate([2, 2, 0], "majority") == 2
    assert aggregate([2, 0], "majority") == 0
    assert aggregate([2, 0], "adjudicated", adjudicated=1) == 1 and aggregate([2, 0], "adjudicated") == 0
    assert aggregate([2, 1], "mean", threshold=1.5) == 1 and aggregate([1, 1], "mean", threshold=1.5) == 0
    assert aggregate([], "majority") is None
    with pytest.raises(CampaignError, match="aggregation rule"):
        aggregate([1], "median")
    assert export_filename("team a/b", "mean", 1.0) == "team_a_b.mean-ge-1.qrels"


def test_assign_and_hand_over_unlabelled_work(camp):
    with pytest.raises(CampaignError, match="already has 2 annotator"):
        camp.assign(OWNER, "c1", "dan", ["q1"])
    holders = [a for a in TEAM if any(it.query_id == "q1" for it in camp.queue(a, "c1"))]
    leaver = holders[0]
    done = next(it for it in camp.queue(leaver, "c1") if it.query_id == "q1")
    camp.judge(leaver, "c1", done.item_id, 1)
    assert camp.assign(OWNER, "c1", "dan", ["q1"], replace=leaver) == 1  # the labelled item stays the leaver's
    assert [it.query_id for it in camp.queue("dan", "c1")] == ["q1"]
    assert camp.item(leaver, "c1", done.item_id).label == 1
    with pytest.raises(CampaignError, match="has no query q9"):
        camp.assign(OWNER, "c1", "dan", ["q9"])


def test_open_campaign_claims_respect_overlap_under_concurrency(cs):
    cs.create(OWNER, _spec(annotators=()), _items())
    people = [f"p{i}" for i in range(6)]
    barrier = threading.Barrier(len(people))
    errors: list[BaseException] = []

    def claim(who: str) -> None:
        try:
            barrier.wait()
            it = cs.next_item(who, "c1")
            if it is not None:
                cs.judge(who, "c1", it.item_id, 1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    queues = {p: cs.queue(p, "c1") for p in people}
    assert all(len(q) == 2 for q in queues.values())  # 6 claims x 1 query (2 items) = 3 queries x overlap 2
    per_query: dict[str, set[str]] = {}
    for p, q in queues.items():
        for it in q:
            per_query.setdefault(it.query_id, set()).add(p)
    assert {k: len(v) for k, v in per_query.items()} == {"q1": 2, "q2": 2, "q3": 2}
    assert cs.next_item("p7", "c1") is None  # everything has its r annotators


def test_concurrent_annotators_every_committed_label_is_kept(db_url, camp):
    def work(who: str) -> None:
        store = CampaignStore(db_url)  # each annotator in their own session, as on the server
        try:
            _judge_all(store, who, lambda w, it: (TEAM.index(w) + it.position) % 3)
        finally:
            store.close()

    threads = [threading.Thread(target=work, args=(a,)) for a in TEAM]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    labels = camp.labels(OWNER, "c1")
    assert len(labels) == 12 and len(camp.history(OWNER, "c1")) == 12
    positions = {it.item_id: it.position for a in TEAM for it in camp.queue(a, "c1")}
    assert all(l.label == (TEAM.index(l.annotator) + positions[l.item_id]) % 3 for l in labels)


def test_an_upgraded_v1_database_takes_campaigns(tmp_path):
    import sqlite3

    fixtures = Path(__file__).resolve().parent / "fixtures"
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript((fixtures / "judg_schema_v1.sql").read_text())
    cs = CampaignStore(f"sqlite:///{path}")
    try:
        cs.create(OWNER, _spec(), _items())
        assert cs.campaign("c1").items == 6 and len(cs.store.judgments()) == 3  # old labels untouched
    finally:
        cs.close()


# ----------------------------------------------------------------------------- agreement
def test_krippendorff_alpha_hand_checked_and_against_the_package():
    import krippendorff
    import numpy as np

    from core.judging.agreement import krippendorff_alpha

    # 2 coders, 4 units: coincidences o00=2, o01=o10=1, o11=4; n0=3, n1=5, n=8 -> α = 1 - 7*2/(2*3*5) = 8/15
    assert krippendorff_alpha([[0, 0, 1, 1], [0, 1, 1, 1]]) == pytest.approx(8 / 15)
    # A: 0 1 2, B: 0 2 2 on the scale 0..2. Nominal: Do = 2/6, De = 22/30 -> α = 6/11.
    # Ordinal δ²(1,2) = 4, δ²(0,1) = 2.25, δ²(0,2) = 12.25: Do = 8/6, De = 6 -> α = 7/9.
    assert krippendorff_alpha([[0, 1, 2], [0, 2, 2]], "nominal", [0, 1, 2]) == pytest.approx(6 / 11)
    assert krippendorff_alpha([[0, 1, 2], [0, 2, 2]], "ordinal", [0, 1, 2]) == pytest.approx(7 / 9)
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability", 4 coders x 12 units with missing values
    nan = np.nan
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None  # one value only: undefined
    assert krippendorff_alpha([[1, nan], [nan, 2]]) is None  # nothing pairable


def test_campaign_agreement_with_missing_ratings_and_cant_judge():
    from datetime import datetime, timezone

    from core.judging.agreement import campaign_agreement, krippendorff_alpha
    from core.judging.agreement import CampaignLabel

    now = datetime.now(timezone.utc)
    rows = [  # (item, query, annotator, label); overlap 2 of 3 annotators; item 4 has a can't judge
        (1, "q1", "ann", 2), (1, "q1", "bob", 2), (2, "q1", "ann", 0), (2, "q1", "bob", 1),
        (3, "q2", "bob", 1), (3, "q2", "cat", 1), (4, "q2", "bob", 0), (4, "q2", "cat", None),
        (5, "q3", "cat", 2), (5, "q3", "ann", 0),
    ]
    labels = [CampaignLabel(i, q, f"d{i}", a, lab, None if lab is not None else "foreign language", None, now)
              for i, q, a, lab in rows]
    res = campaign_agreement(labels, max_label=2)
    assert res.annotators == ["ann", "bob", "cat"] and res.items == 4 and res.ratings == 8  # item 4: one rating
    nan = float("nan")
    matrix = [[2, 0, nan, 0], [2, 1, 1, nan], [nan, nan, 1, 2]]
    assert res.alpha_nominal == pytest.approx(krippendorff_alpha(matrix, "nominal", [0, 1, 2]))
    assert res.alpha_ordinal == pytest.approx(krippendorff_alpha(matrix, "ordinal", [0, 1, 2]))
    # Fleiss over the 4 two-rating items: counts per category [0,0,2], [1,1,0], [0,2,0], [1,0,1]
    from core.judging.agreement import fleiss_kappa
    assert res.fleiss == pytest.approx(fleiss_kappa([[0, 0, 2], [1, 1, 0], [0, 2, 0], [1, 0, 1]]))
    assert (res.fleiss_items, res.fleiss_raters) == (4, 2)
    pairs = {c["pair"]: (c["items"], c["kappa"]) for c in res.cohen}
    assert pairs["ann / bob"][0] == 2 and pairs["ann / cat"][0] == 1 and pairs["bob / cat"][0] == 1
    assert res.per_query["q2"].items == 1 and res.per_query["q2"].alpha_nominal is None  # one item, one value
    assert res.per_query["q1"].alpha_nominal == pytest.approx(krippendorff_alpha([[2, 0], [2, 1]], "nominal", [0, 1, 2]))


# ----------------------------------------------------------------------------- CLI
def _cli_pool(tmp_path: Path) -> Path:
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    qids = list(ds.split_queries("test"))[:3]
    docs = [d for d in ds.corpus if d not in qids][:3]
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({q: docs[:2] if i else docs for i, q in enumerate(qids)}))
    return path


def test_cli_create_status_assign_agreement_export(tiny_data, tmp_path):
    from tests.conftest import run_main

    db = f"sqlite:///{tmp_path / 'c.sqlite'}"
    pool = _cli_pool(tmp_path)
    qids = list(json.loads(pool.read_text()))
    code, out, err = run_main("campaign", "create", "--db", db, "--name", "team", "--as", OWNER, "--pool", str(pool),
                              "--queries", ",".join(qids), "--overlap", "2", *sum((["--annotator", a] for a in TEAM), []))
    assert code == 0, err
    assert "campaign 'team': 7 items on 3 queries" in out and "overlap 2; annotators: ann, bob, cat" in out
    cs = CampaignStore(db)
    try:
        for who in TEAM:
            while (it := cs.next_item(who, "team")) is not None:
                cs.judge(who, "team", it.item_id, 2 if who != "bob" else it.position % 3)
    finally:
        cs.close()
    code, out, _ = run_main("campaign", "status", "--db", db, "--name", "team", "--as", OWNER)
    assert code == 0 and "7/7 items have their 2 ratings" in out and "ann" in out
    code, out, _ = run_main("campaign", "agreement", "--db", db, "--name", "team", "--as", OWNER)
    assert code == 0 and "Krippendorff's alpha (nominal)" in out and "Cohen's kappa ann / bob" in out
    code, out, _ = run_main("campaign", "export", "--db", db, "--name", "team", "--as", OWNER, "--rule", "mean",
                            "--threshold", "1.5", "--out-dir", str(tmp_path / "out"))
    written = tmp_path / "out" / "team.mean-ge-1.5.qrels"
    assert code == 0 and str(written) in out and "rule mean-ge-1.5: 1 when the mean label is at least 1.5" in out
    assert sum(len(v) for v in read_trec_qrels(written).values()) == 7
    code, out, _ = run_main("campaign", "assign", "--db", db, "--name", "team", "--as", OWNER, "--annotator", "dan",
                            "--queries", qids[0], "--replace", "ann")
    assert code == 0 and out.startswith("assigned 0 item(s)")  # ann labelled everything: nothing to hand over


@pytest.mark.parametrize("argv, message", [
    (["status", "--name", "team", "--as", "ann"], "ann is not an owner of campaign 'team'"),
    (["export", "--name", "team", "--as", "bob"], "bob is not an owner"),
    (["agreement", "--name", "nope", "--as", OWNER], "unknown campaign 'nope'; known: team"),
    (["assign", "--name", "team", "--as", OWNER, "--annotator", "dan", "--queries", "q404"], "has no query q404"),
    (["create", "--name", "x", "--as", OWNER, "--queries", "q1", "--sample", "2"], "not both"),
    (["create", "--name", "x", "--as", OWNER, "--split", "test"], "name the systems to pool"),
    (["create", "--name", "x", "--as", OWNER, "--split", "nosuch", "--systems", "bm25"], "unknown query split 'nosuch'"),
    (["create", "--name", "x", "--as", OWNER, "--split", "test", "--overlap", "3", "--annotator", "a",
      "--pool", "POOL"], "overlap 3 needs at least 3 annotators"),
    (["create", "--name", "x", "--as", OWNER, "--pool", "BADPOOL"], "not a JSON pool"),
    (["export", "--name", "team", "--as", OWNER, "--rule", "median"], "invalid choice"),
])
def test_cli_bad_input_is_one_line_and_changes_nothing(tiny_data, tmp_path, argv, message):
    from tests.conftest import run_main

    db = f"sqlite:///{tmp_path / 'c.sqlite'}"
    pool = _cli_pool(tmp_path)
    assert run_main("campaign", "create", "--db", db, "--name", "team", "--as", OWNER, "--pool", str(pool),
                    "--split", "test")[0] == 0
    (tmp_path / "bad.json").write_text("{not json")
    argv = [str(pool) if a == "POOL" else str(tmp_path / "bad.json") if a == "BADPOOL" else a for a in argv]
    try:
        code, out, err = run_main("campaign", argv[0], "--db", db, *argv[1:])
    except SystemExit as exc:  # argparse usage errors exit before dispatch
        code, err = exc.code, ""
    assert code == 2
    if err:
        assert message in err and err.count("\n") == 1
    listed = run_main("campaign", "list", "--db", db, "--as", OWNER)[1].splitlines()[2:]
    assert [line.split()[0] for line in listed] == ["team"]  # nothing else was created


def test_cli_create_pools_systems_through_the_runner(built, tmp_path):
    from tests.conftest import run_main

    db = f"sqlite:///{tmp_path / 'c.sqlite'}"
    code, out, err = run_main("campaign", "create", "--db", db, "--name", "bm", "--as", OWNER, "--systems", "bm25",
                              "--depth", "3", "--sample", "2", "--seed", "7", "--split", "test")
    assert code == 0, err
    assert "6 items on 2 queries" in out and "sample of 2 from split test (seed 7)" in out and "open" in out
    cs = CampaignStore(db)
    try:
        item = cs.next_item("zoe", "bm")  # an open campaign: the first visitor claims a query
        assert item is not None and item.doc_id != item.query_id  # QQP: the query's own id is never pooled
    finally:
        cs.close()


# ----------------------------------------------------------------------------- pages (AppTest)
PAIRS = Path(__file__).resolve().parent / "fixtures" / "judg_pairs.tsv"
PAIRS_NAME = f"pairs:{PAIRS}"
OIDC_SECRETS = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32,
                "client_id": "studio", "client_secret": "s", "server_metadata_url":
                "http://127.0.0.1:9/.well-known/openid-configuration"}


@pytest.fixture
def page_env(tmp_path, monkeypatch):
    """A pairs dataset and a campaign (overlap 2 of ann, bob, cat) in the pages' database."""
    from core.data.datasets import load_dataset
    from core.judging.campaign_pool import items_from_pool

    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    monkeypatch.setenv("QRS_OWNERS", OWNER)
    for name in ("QRS_TRUSTED_HEADER", "QRS_USER"):
        monkeypatch.delenv(name, raising=False)
    ds = load_dataset(PAIRS_NAME)
    qids = list(ds.queries)[:3]
    docs = [d for d in ds.corpus if d not in qids][:2]
    spec = CampaignSpec("team", ds.name, QuerySet("list", ids=tuple(qids)), ("given",), 2, 2, (OWNER,), TEAM)
    cs = CampaignStore()
    cs.create(OWNER, spec, items_from_pool(ds, {q: docs for q in qids}))
    yield cs
    cs.close()


def _app(page: str, user: dict | None, **secrets):
    from tests.conftest import app_test

    at = app_test(f"pages/{page}")
    at.session_state["dataset"] = PAIRS_NAME
    at.secrets["auth"] = OIDC_SECRETS
    for k, v in secrets.items():
        at.secrets[k] = v
    at.user = user if user is not None else {"is_logged_in": False}
    return at


def test_visitor_not_logged_in_sees_the_login_page_and_nothing_else(page_env):
    for page in ("4_Annotate.py", "8_Campaigns.py"):
        at = _app(page, None).run()
        assert not at.exception
        assert [b.label for b in at.button] == ["Log in"]
        assert not at.text_input and not at.dataframe and not at.tabs and [t.value for t in at.title] == [
            "Question Retrieval Studio"]
    assert page_env.labels(OWNER, "team") == []


def test_logged_in_annotator_judges_their_queue_and_cannot_reach_others_items(page_env):
    cs = page_env
    at = _app("4_Annotate.py", {"is_logged_in": True, "email": "ann", "sub": "u-ann"}).run()
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
    assert "not assigned to ann" in panel_data(at, PANEL)["failed"][forged["key"]]
    assert _snapshot_team(cs) == before


def _snapshot_team(cs: CampaignStore) -> tuple:
    return tuple(sorted((l.item_id, l.annotator, l.label, l.reason) for l in cs.labels(OWNER, "team")))


def test_campaigns_page_owner_adjudicates_conflicts_and_non_owner_is_refused(page_env):
    cs = page_env
    for who, label in (("ann", 2), ("bob", 0), ("cat", 1)):
        while (it := cs.next_item(who, "team")) is not None:
            cs.judge(who, "team", it.item_id, label)
    at = _app("8_Campaigns.py", {"is_logged_in": True, "email": "bob"}).run()
    assert not at.exception and "for the lab's owners and researchers" in at.info[0].value and not at.tabs
    at = _app("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run()
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
    at = _app("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run()
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
        at = _app(page, {"is_logged_in": True, "email": "Ann"}).run()  # an annotator
        assert not at.exception and "for the lab's owners and researchers" in at.info[0].value, page
        assert not at.dataframe and not at.text_input and not at.multiselect, page
    at = _app("5_Error_Analysis.py", {"is_logged_in": True, "email": "rita@lab.example"}).run()
    assert not at.exception and not [i for i in at.info if "owners and researchers" in i.value]
    who = lambda name, owner=False, researcher=False, mode="oidc": SimpleNamespace(  # noqa: E731
        authenticated=name is not None, sees_rankings=mode == "none" or owner or researcher)
    assert [p.title for p in visible_pages(who("ann"))] == ["Annotate"]
    assert visible_pages(who(None)) == []
    assert len(visible_pages(who("rita", researcher=True))) == len(visible_pages(who("x", mode="none"))) > 5


def test_trusted_header_mode_only_when_configured(page_env, monkeypatch):
    at = _app("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setenv("QRS_TRUSTED_HEADER", "X-Forwarded-User")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {"X-Forwarded-User": "cat"})
    at.run()
    assert not at.exception and "cat" in [t.value for t in at.text]
    at = _app("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {})
    at.run()
    assert len(at.error) == 1 and "no X-Forwarded-User header" in at.error[0].value and not at.text_input
    monkeypatch.delenv("QRS_TRUSTED_HEADER")
    at = _app("4_Annotate.py", None)
    at.secrets.pop("auth")
    monkeypatch.setattr("ui.auth.request_headers", lambda: {"X-Forwarded-User": "mallory"})  # not configured
    at.run()
    assert not at.exception and at.text_input(key="annotate.annotator").value == ""


# ----------------------------------------------------------------------------- a real OIDC login
from tests.oidc_server import oidc_provider  # noqa: E402,F401  (session fixture)


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
    at = _app("5_Error_Analysis.py", {"is_logged_in": True, "email": OWNER})
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


# ----------------------------------------------------------------------------- identities, undo, pooling once
def test_identities_are_canonical_email_lower_cased_everywhere(cs):
    from core.judging.identity import canonical_identity, identity_set

    assert canonical_identity("  Bob@Lab.Example ") == "bob@lab.example" and canonical_identity("u-Ann") == "u-Ann"
    assert identity_set("Olivia@Lab.Example, ,bob@lab.example") == {"olivia@lab.example", "bob@lab.example"}
    spec = CampaignSpec("mixed", "toy", QuerySet("list", ids=QUERIES), ("bm25",), 2, 1, ("Olivia@Lab.Example",),
                        ("Bob@Lab.Example", "ANN@lab.example"))
    c = cs.create("OLIVIA@LAB.EXAMPLE", spec, _items())
    assert c.owners == ("olivia@lab.example",) and c.annotators == ("ann@lab.example", "bob@lab.example")
    first = cs.next_item("bob@lab.example", "mixed")  # the provider's spelling differs from the CLI's: one person
    assert first is not None and cs.next_item("BOB@LAB.EXAMPLE", "mixed").item_id == first.item_id
    cs.judge("Bob@Lab.Example", "mixed", first.item_id, 2)
    assert cs.own_progress("bob@lab.example", "mixed") == (1, len(cs.queue("bob@lab.example", "mixed")))
    assert [c.name for c in cs.campaigns("Bob@lab.example")] == ["mixed"]
    assert cs.progress("Olivia@lab.example", "mixed").annotators["bob@lab.example"][0] == 1  # the owner, any case


def test_schema_v5_lower_cases_stored_email_names_and_keeps_two_spellings_apart(tmp_path):
    from sqlalchemy import create_engine, text

    from core.judging.judgments import JudgmentStore
    from core.judging.schema import SCHEMA_VERSION

    url = f"sqlite:///{tmp_path / 'v4.sqlite'}"
    cs = CampaignStore(url)
    cs.create(OWNER, _spec(annotators=("ann", "Bob@Lab.Example", "cat")), _items())
    cs.store.set_label("Zed@Lab.Example", "toy", "query q1 text", "d1", "doc d1 text", 1)
    cs.close()
    engine = create_engine(url)
    with engine.begin() as conn:  # as a v4 database wrote them: the names as typed, two spellings of zed
        conn.execute(text("UPDATE annotators SET name = 'Bob@Lab.Example' WHERE name = 'bob@lab.example'"))
        conn.execute(text("UPDATE annotators SET name = 'Zed@Lab.Example' WHERE name = 'zed@lab.example'"))
        conn.execute(text("INSERT INTO annotators (name, created_at) VALUES ('zed@lab.example', '2024-01-01')"))
        conn.execute(text("UPDATE meta SET value = '4' WHERE key = 'schema_version'"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0004'"))
        conn.execute(text("DROP TABLE campaign_judge_labels"))  # schema v6's table: a v4 database has none
        conn.execute(text("DROP TABLE deletions"))  # schema v7's table
        conn.execute(text("DROP TABLE label_requests"))  # schema v8's table
        for table, column in (("judgments", "reason"), ("judgment_history", "reason"),
                              ("judgment_history", "reason_before")):  # schema v9's columns
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    engine.dispose()
    cs = CampaignStore(url)  # opening upgrades
    try:
        assert cs.store.schema_version() == SCHEMA_VERSION == 9
        names = {r.annotator for r in cs.store.judgments()} | {a for c in cs.campaigns() for a in c.annotators}
        assert "bob@lab.example" in names and "Bob@Lab.Example" not in names
        assert len(cs.queue("BOB@lab.example", "c1")) == 4  # bob's assignment found under the canonical name
        engine = create_engine(url)
        with engine.connect() as conn:
            stored = sorted(n for (n,) in conn.execute(text("SELECT name FROM annotators WHERE name LIKE 'zed%'"
                                                            " OR name LIKE 'Zed%'")))
        engine.dispose()
        assert stored == ["Zed@Lab.Example", "zed@lab.example"]  # both spellings kept: nothing merged or lost
    finally:
        cs.close()
    assert JudgmentStore.check_annotator(" Zed@LAB.example ") == "zed@lab.example"


def test_undo_walks_an_annotators_history_back(camp):
    it = camp.next_item("ann", "c1")
    camp.judge("ann", "c1", it.item_id, 1, rationale="first")
    camp.judge("ann", "c1", it.item_id, 2, rationale="second")
    assert camp.undo("ann", "c1", it.item_id).previous == 2
    got = camp.item("ann", "c1", it.item_id)
    assert (got.label, got.rationale, got.judged) == (1, "first", True)
    camp.undo("ann", "c1", it.item_id)
    assert not camp.item("ann", "c1", it.item_id).judged and camp.next_item("ann", "c1").item_id == it.item_id
    before = _snapshot(camp)
    with pytest.raises(CampaignError, match="nothing to undo"):
        camp.undo("ann", "c1", it.item_id)
    assert _snapshot(camp) == before
    foreign = next(q for q in camp.queue("bob", "c1") if q.item_id not in {x.item_id for x in camp.queue("ann", "c1")})
    camp.judge("bob", "c1", foreign.item_id, 0)
    with pytest.raises(CampaignAuthError, match="not assigned to ann"):
        camp.undo("ann", "c1", foreign.item_id)
    assert [h.action for h in camp.history(OWNER, "c1") if h.item_id == it.item_id] == ["label", "label", "undo", "undo"]


def test_cli_owner_check_against_the_configuration(tiny_data, tmp_path, monkeypatch):
    from tests.conftest import run_main

    monkeypatch.setenv("QRS_OWNERS", "olivia@lab.example")
    db = f"sqlite:///{tmp_path / 'c.sqlite'}"
    pool = _cli_pool(tmp_path)
    qids = ",".join(json.loads(pool.read_text()))
    base = ["campaign", "create", "--db", db, "--pool", str(pool), "--queries", qids, "--overlap", "1"]
    code, out, err = run_main(*base, "--name", "x", "--as", "ann@lab.example", "--annotator", "bob@lab.example")
    assert code == 2 and err.count("\n") == 1 and "ann@lab.example is not an owner in the configuration" in err
    store = CampaignStore(db)
    try:
        assert store.campaigns() == []  # nothing created
    finally:
        store.close()
    code, out, err = run_main(*base, "--name", "team", "--as", "OLIVIA@LAB.EXAMPLE", "--annotator", "Bob@Lab.Example")
    assert code == 0, err
    assert "annotators: bob@lab.example" in out and "owners: olivia@lab.example" in out
    code, out, err = run_main("campaign", "status", "--db", db, "--name", "team", "--as", "Olivia@lab.example")
    assert code == 0 and "bob@lab.example" in out, err
    code, out, err = run_main("campaign", "list", "--db", db, "--as", "olivia@LAB.example")
    assert code == 0 and "bob@lab.example" in out and "team" in out
    code, out, err = run_main("campaign", "list", "--db", db, "--as", "ann@lab.example")  # not in the campaign
    assert code == 0 and "team" not in out and "bob@lab.example" not in out
    code, out, err = run_main("campaign", "list", "--db", db, "--as", "Bob@Lab.Example")  # sees their own only
    assert code == 0 and "team" in out and "olivia@lab.example" not in out
    try:
        run_main("campaign", "list", "--db", db)
        raise AssertionError("campaign list without --as was accepted")
    except SystemExit as exc:
        assert exc.code == 2


def test_configured_people_read_the_secrets_file_when_the_environment_is_silent(tmp_path, monkeypatch):
    from core.judging.identity import configured_people

    for name in ("QRS_OWNERS", "QRS_RESEARCHERS"):
        monkeypatch.delenv(name, raising=False)
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[qrs]\nowners = ["Olivia@Lab.Example"]\nresearchers = ["rita@lab.example", " "]\n')
    assert configured_people("owners", [secrets]) == {"olivia@lab.example"}
    assert configured_people("researchers", [secrets]) == {"rita@lab.example"}
    assert configured_people("owners", [tmp_path / "missing.toml"]) == frozenset()
    monkeypatch.setenv("QRS_OWNERS", "x@y")
    assert configured_people("owners", [secrets]) == {"x@y"}


def test_rank_pool_loads_each_system_once(built):
    from core.data.datasets import load_dataset
    from core.judging.campaign_pool import rank_pool
    from core.judging.pooling import system_top_ids
    from core.serving.runner import loader_for

    ds = load_dataset("qqp-bimpm")
    qids = list(ds.split_queries("test"))[:4]
    calls: list[str] = []
    plain = loader_for(ds)

    def counting(name, variant=None, options=()):
        calls.append(name)
        return plain(name, variant, options)

    pooled = rank_pool(ds, qids, ["bm25"], 3, load=counting)
    assert calls == ["bm25"]  # one load for four queries
    for q in qids:  # the same top 3 as one query at a time through the one runner
        assert pooled[q]["bm25"] == system_top_ids("bm25", ds, ds.queries[q], 3, q)


def test_campaign_mode_undo_on_the_page_and_an_empty_queue_names_its_owner(page_env):
    cs = page_env
    at = _app("4_Annotate.py", {"is_logged_in": True, "email": "ann"}).run()
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
    at = _app("4_Annotate.py", {"is_logged_in": True, "email": "Zoe@Lab.Example"}).run()
    assert not at.exception and any("No judging campaign names zoe@lab.example" in t.value for t in at.text)


def test_annotate_keeps_the_typed_name_across_pages_and_shows_its_labels(page_env, monkeypatch):
    from core.judging.judgments import JudgmentStore

    monkeypatch.delenv("QRS_OWNERS", raising=False)
    store = JudgmentStore()
    try:
        store.set_label("ada", page_env.campaign("team").dataset, "some query", "d1", "some text", 2)
    finally:
        store.close()
    at = _app("4_Annotate.py", {"is_logged_in": False})
    at.secrets.pop("auth")  # single-user mode: the name is typed
    at.run()
    at.text_input(key="annotate.annotator").input("ada").run()
    assert any(t.value.startswith("ada: 1 label(s)") for t in at.text)
    # another page runs in the same browser session: Streamlit drops the state of every widget that run did
    # not draw (AppTest runs one page file alone, so the other page shares this test's session state)
    other = _app("7_Case_Studies.py", {"is_logged_in": False})
    other._session_state, other.session_state = at._session_state, at.session_state
    other.secrets.pop("auth")
    other.run()
    assert not other.exception and "annotate.annotator" not in at.session_state
    back = _app("4_Annotate.py", {"is_logged_in": False})  # back on Annotate in the same session
    back._session_state, back.session_state = at._session_state, at.session_state
    back.secrets.pop("auth")
    at = back.run()
    assert not at.exception and at.text_input(key="annotate.annotator").value == "ada"
    assert any(t.value.startswith("ada: 1 label(s)") for t in at.text)


def test_case_study_marks_label_one_as_related_not_relevant():
    from core.judging.case_tables import CaseHit

    hits = [CaseHit(1, "a", "x", 1.0, user_label=1), CaseHit(2, "b", "y", 0.9, user_label=2),
            CaseHit(3, "c", "z", 0.8, qrel=1), CaseHit(4, "d", "w", 0.7, qrel=0, user_label=2)]
    assert [h.relevant for h in hits] == [False, True, True, False]
    assert [h.mark for h in hits] == ["related (yours)", "✅ same (yours)", "✅", ""]


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
    at = _app("5_Error_Analysis.py", {"is_logged_in": True, "email": OWNER})
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
    at = _app("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run(timeout=600)
    assert not at.exception, at.exception
    assert "Judging budget" in [h.value for h in at.subheader]
    assert any("Label next, in this order" in c.value for c in at.caption), [c.value for c in at.caption]
    assert any(df.value is not None and "width at budget" in df.value.columns for df in at.dataframe), [e.value for e in at.error]
