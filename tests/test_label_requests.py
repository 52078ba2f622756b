"""Idempotent label requests (schema v8, ``label_requests``) on SQLite and a real PostgreSQL (``db_url``): a
label, undo or "can't judge" resent with the same key after a lost acknowledgement is applied once, also when
two threads resend it at the same moment; a new key with the same label is a plain re-submit; bad keys are
refused with nothing written."""
from __future__ import annotations

import threading

import pytest

from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet
from core.judging.campaigns import CampaignStore
from core.judging.database import JudgmentError
from core.judging.judgments import JudgmentStore

OWNER, TEAM = "olivia@lab", ("ann", "bob")


def _campaign(url: str) -> CampaignStore:
    cs = CampaignStore(url)
    items = [ItemSpec(q, f"query {q} text", d, f"doc {d} text", {"bm25": i + 1})
             for q in ("q1", "q2") for i, d in enumerate(("d1", "d2"))]
    cs.create(OWNER, CampaignSpec("c1", "toy", QuerySet("list", ids=("q1", "q2")), ("bm25",), 2, 2, (OWNER,), TEAM),
              items)
    return cs


def _history_count(store: JudgmentStore) -> int:
    return len(store.history())


def test_a_resent_free_label_is_stored_once(db_url):
    s = JudgmentStore(db_url)
    try:
        first = s.set_label("ann", "toy", "a query", "d1", "doc one", 2, request="k-1")
        again = s.set_label("ann", "toy", "a query", "d1", "doc one", 2, request="k-1")
        assert first.changed and not first.repeated and not again.changed and again.repeated
        assert len(s.judgments()) == 1 and _history_count(s) == 1
        # the key is a request, not a value: a later label on the same item under the same key is not applied
        stale = s.set_label("ann", "toy", "a query", "d1", "doc one", 0, request="k-1")
        assert stale.repeated and s.judgments()[0].label == 2
        # a new key with another label is a new request
        assert s.set_label("ann", "toy", "a query", "d1", "doc one", 1, request="k-2").changed
        undo = s.undo("ann", "toy", "a query", "d1", request="u-1")
        assert undo.changed and s.judgments()[0].label == 2
        assert s.undo("ann", "toy", "a query", "d1", request="u-1").repeated  # resent undo: not a second undo
        assert s.judgments()[0].label == 2 and s.requests_applied(["k-1", "k-2", "u-1", "nope"]) == {"k-1", "k-2", "u-1"}
    finally:
        s.close()


def test_a_campaign_label_resent_concurrently_is_applied_once(db_url):
    cs = _campaign(db_url)
    try:
        item = cs.queue("ann", "c1")[0].item_id
        results, errors = [], []

        def send() -> None:
            try:
                results.append(cs.judge("ann", "c1", item, 2, rationale="same", request="same-key"))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=send) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sum(r.changed for r in results) == 1 and sum(r.repeated for r in results) == 5
        history = [h for h in cs.history(OWNER, "c1") if h.item_id == item]
        assert [h.action for h in history] == ["label"] and cs.item("ann", "c1", item).label == 2
        # can't judge and undo under their own keys, each applied once
        assert cs.cant_judge("ann", "c1", item, "unclear", request="cj-1").changed
        assert cs.cant_judge("ann", "c1", item, "unclear", request="cj-1").repeated
        assert cs.undo("ann", "c1", item, request="u-1").changed
        assert cs.undo("ann", "c1", item, request="u-1").repeated
        assert cs.item("ann", "c1", item).label == 2  # one undo: back to the label before "can't judge"
    finally:
        cs.close()


def test_a_refused_request_records_no_key(db_url):
    cs = _campaign(db_url)
    try:
        item = cs.queue("ann", "c1")[0].item_id
        with pytest.raises(JudgmentError):
            cs.judge("ann", "c1", item, 7, request="bad-label")  # out of range: refused, key not kept
        assert cs.store.requests_applied(["bad-label"]) == set()
        assert cs.judge("ann", "c1", item, 1, request="bad-label").changed  # the same key may then be used
    finally:
        cs.close()


@pytest.mark.parametrize("key", ["", " padded ", "x" * 65, "é-key", "tab\tkey", 7])
def test_bad_request_keys_are_refused_with_nothing_written(tmp_path, key):
    s = JudgmentStore(f"sqlite:///{tmp_path / 'j.sqlite'}")
    try:
        with pytest.raises(JudgmentError, match="request key"):
            s.set_label("ann", "toy", "a query", "d1", "doc one", 2, request=key)
        assert s.judgments() == [] and s.history() == []
    finally:
        s.close()


def test_own_labels_are_the_queues_labels(db_url):
    cs = _campaign(db_url)
    try:
        items = [it.item_id for it in cs.queue("ann", "c1")]
        cs.judge("ann", "c1", items[0], 2, rationale="same")
        cs.cant_judge("ann", "c1", items[1], "unclear")
        cs.judge("bob", "c1", items[2], 0)  # someone else's label is not ann's
        want = {q.item_id: (q.label, q.cant_judge, q.rationale) for q in cs.queue("ann", "c1") if q.judged}
        assert cs.own_labels("ann", "c1") == want == {items[0]: (2, None, "same"), items[1]: (None, "unclear", None)}
        assert cs.own_labels("nobody", "c1") == {}
    finally:
        cs.close()
