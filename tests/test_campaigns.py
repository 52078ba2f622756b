"""Judging campaigns (core.judging.campaigns) on SQLite and a real PostgreSQL (``db_url``): overlap 2 with
three annotators, server-side queues that resume, "can't judge", adjudication with history, exports
with the rule named, concurrent writers and claims, and authorisation through the store's API."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.data.trec import read_qrels as read_trec_qrels
from core.judging.campaign_records import CampaignAuthError, CampaignError, CampaignSpec, QuerySet
from core.judging.campaign_results import aggregate, export_filename
from core.judging.campaigns import CampaignStore
from tests.campaign_env import OWNER, QUERIES, TEAM, campaign_items, campaign_spec
from tests.side_by_side import side_by_side


@pytest.fixture
def cs(db_url: str):
    store = CampaignStore(db_url)
    yield store
    store.close()


@pytest.fixture
def camp(cs):
    cs.create(OWNER, campaign_spec(), campaign_items())
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
        (lambda: camp.create("ann", campaign_spec("c2"), campaign_items()), "only an owner creates"),
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
        (campaign_spec(overlap=4), "overlap 4 needs at least 4 annotators"),
        (campaign_spec(overlap=0), "overlap must be"),
    ]
    for spec, message in bad:
        with pytest.raises(CampaignError, match=message):
            cs.create(OWNER, spec, campaign_items())
    with pytest.raises(CampaignError, match="appears twice"):
        cs.create(OWNER, campaign_spec(), campaign_items() + campaign_items()[:1])
    with pytest.raises(CampaignError, match="pool is empty"):
        cs.create(OWNER, campaign_spec(), [])
    assert cs.campaigns() == []
    cs.create(OWNER, campaign_spec(), campaign_items())
    with pytest.raises(CampaignError, match="exists already"):
        cs.create(OWNER, campaign_spec(), campaign_items())


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
    cs.create(OWNER, campaign_spec(annotators=()), campaign_items())
    people = [f"p{i}" for i in range(6)]
    barrier = threading.Barrier(len(people))

    def claim(who: str) -> None:
        barrier.wait()
        it = cs.next_item(who, "c1")
        if it is not None:
            cs.judge(who, "c1", it.item_id, 1)

    errors = side_by_side(claim, [(p,) for p in people])
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

    errors = side_by_side(work, [(a,) for a in TEAM])
    assert not errors, errors
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
        cs.create(OWNER, campaign_spec(), campaign_items())
        assert cs.campaign("c1").items == 6 and len(cs.store.judgments()) == 3  # old labels untouched
    finally:
        cs.close()


# ----------------------------------------------------------------------------- identities and undo
def test_identities_are_canonical_email_lower_cased_everywhere(cs):
    from core.judging.identity import canonical_identity, identity_set

    assert canonical_identity("  Bob@Lab.Example ") == "bob@lab.example" and canonical_identity("u-Ann") == "u-Ann"
    assert identity_set("Olivia@Lab.Example, ,bob@lab.example") == {"olivia@lab.example", "bob@lab.example"}
    spec = CampaignSpec("mixed", "toy", QuerySet("list", ids=QUERIES), ("bm25",), 2, 1, ("Olivia@Lab.Example",),
                        ("Bob@Lab.Example", "ANN@lab.example"))
    c = cs.create("OLIVIA@LAB.EXAMPLE", spec, campaign_items())
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
    cs.create(OWNER, campaign_spec(annotators=("ann", "Bob@Lab.Example", "cat")), campaign_items())
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


def test_case_study_marks_label_one_as_related_not_relevant():
    from core.judging.case_tables import CaseHit

    hits = [CaseHit(1, "a", "x", 1.0, user_label=1), CaseHit(2, "b", "y", 0.9, user_label=2),
            CaseHit(3, "c", "z", 0.8, qrel=1), CaseHit(4, "d", "w", 0.7, qrel=0, user_label=2)]
    assert [h.relevant for h in hits] == [False, True, True, False]
    assert [h.mark for h in hits] == ["related (yours)", "✅ same (yours)", "✅", ""]
