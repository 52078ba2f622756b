"""In real browsers: a team judges one campaign against a real PostgreSQL server.

Three annotators log in through the local OIDC provider (oidc-provider-mock on 127.0.0.1) in three headless
Chromium sessions and judge a campaign with overlap 2 at the same time (a thread and a WebDriver each). The
server (``streamlit run serve.py``: labels go through the panel's commit endpoint) is killed (SIGKILL) once
right after each annotator pressed their third key and started again; each annotator opens the campaign again
and the labels not acknowledged are resent from the browser's storage. One browser is killed (SIGKILL) after it
committed some labels, with one more click in flight. Afterwards every
label a session saw committed is in the store (nothing else, bar that in-flight click), the killed annotator
resumes in a new browser where they stopped, agreement is computed, the owner adjudicates every conflict on
the Campaigns page and downloads TREC qrels whose file name names the rule. Negative tests: a visitor who is
not logged in gets the login page and nothing else; an annotator opening an item not assigned to them
(``Annotate?item=ID``) sees one clear line and nothing changes in the store; an annotator cannot open Compare.

Judging happens in the judging panel, with keys only: ann's first label is the key 2 pressed right after
choosing the campaign in the "Judge" picker, her second right after typing a rationale (R opens the box; a
digit typed there is text, not a label; Enter leaves it), and she reloads the page right after her fourth key
(the label is resent from the browser's storage and stored once). Bob undoes one label with U and labels the
item again, and judges the second half of his queue in list mode (L; J and K move). Every label counted as
seen was shown saved by the panel (acknowledged by the server).
"""
from __future__ import annotations

import re
import threading
import time
import traceback

import pytest

pytest.importorskip("selenium")
from selenium.webdriver.common.keys import Keys  # noqa: E402

from core.judging.campaigns import CampaignStore  # noqa: E402
from tests.e2e.campaign_driver import (WAIT, button, css, idle, keyed, login, open_campaign, open_tab,  # noqa: E402
                                       panel_state, pick, press, quit_quietly, shot, start_drivers, texts, wait_for)
from tests.e2e.campaign_fixtures import (CAMPAIGN, OWNER, TEAM, kill_browser, oidc_provider,  # noqa: E402,F401
                                         postgres_server, team_app)
from tests.side_by_side import side_by_side  # noqa: E402

KILLED, KILL_AFTER = TEAM[2], 3  # cat's browser dies after 3 committed labels, with a 4th click in flight
RESTART_AT = 2  # the server is killed and started again right after everyone's third key (queue position 2)
DECISION = 1  # the owner's decision on every conflict
RATIONALE = "near-duplicate wording"  # ann's rationale on her second item


def label_of(who: str, item_id: int) -> int:
    """Each annotator's label: ann always 2, bob alternates 2/0, cat 1 or 2 (agreements and conflicts)."""
    if who == TEAM[0]:
        return 2
    if who == TEAM[1]:
        return 2 if item_id % 2 == 0 else 0
    return 1 if item_id % 3 else 2


def judge_queue(driver, app: str, who: str, seen: dict[int, int], in_flight: list[int],
                kill_after: int | None = None, undone: list[int] | None = None,
                restart: threading.Barrier | None = None) -> None:
    """Log in as ``who`` and label their queue with keys in the judging panel; ``seen`` gets each label the
    panel showed saved (acknowledged by the server). With ``kill_after``: after that many, press one more key
    and kill the browser at once. ann presses her first key right after the campaign picker, her second right
    after a rationale, and reloads the page right after her third key; bob undoes one label with U and judges
    the second half of his queue in list mode (J/K checked there). With ``restart``: right after the key at
    ``RESTART_AT`` each waits there until the server was killed and started again (the barrier's action), then
    opens the campaign again; the label is counted once the panel shows it saved."""
    undone = [] if undone is None else undone
    login(driver, app, who)
    open_campaign(driver, app)
    queue = app_queues[who]
    for n, item_id in enumerate(queue):
        wait_for(driver, lambda d: (s := panel_state(d)) is not None and s[0] == str(item_id),
                 f"{who}'s panel on item {item_id}")
        label = label_of(who, item_id)
        if who == TEAM[0] and n == 1:
            type_rationale(driver, label)
        if who == TEAM[1] and n == len(queue) // 2:  # list mode for the rest; J then K comes back
            press(driver, "l")
            wait_for(driver, lambda d: (s := panel_state(d)) is not None and s[2] == "list", "list mode")
            press(driver, "j")
            wait_for(driver, lambda d: panel_state(d)[0] == str(queue[n + 1]), "J moves down")
            press(driver, "k")
            wait_for(driver, lambda d: panel_state(d)[0] == str(item_id), "K moves up")
            wait_for(driver, lambda d: (rows := css(d, '.qrs-judge [role="option"]'))
                     and sum(r.get_attribute("aria-selected") == "true" for r in rows) == 1, "one row selected")
        if kill_after is not None and len(seen) == kill_after:
            in_flight.append(item_id)
            press(driver, str(label))
            kill_browser(driver)
            return
        press(driver, str(label))  # to whatever has the focus, as a person's key press goes
        if n + 1 < len(queue):  # the next item is painted by the browser, before any answer of the server
            assert panel_state(driver)[0] == str(queue[n + 1]), (who, panel_state(driver))
        if restart is not None and n == RESTART_AT:  # the server dies now (whatever was in flight) and comes back
            restart.wait()
            open_campaign(driver, app)  # a new session: the campaign is picked again, the rest is resent
        if who == TEAM[0] and n == 3:  # a reload right after the key: the label is resent, stored once
            driver.refresh()
            open_campaign(driver, app)
        wait_for(driver, lambda d: (s := panel_state(d)) is not None and s[1] == 0,
                 f"{who}'s label on item {item_id} saved")
        seen[item_id] = label
        if who == TEAM[1] and n == 1 and not undone:  # bob: U takes the label back, the item comes back
            press(driver, "u")
            wait_for(driver, lambda d: (s := panel_state(d)) is not None and s[0] == str(item_id) and s[1] == 0,
                     f"{who}'s undo of item {item_id} saved")
            undone.append(item_id)
            press(driver, str(label))
            wait_for(driver, lambda d: (s := panel_state(d)) is not None and s[1] == 0,
                     f"{who}'s label again on item {item_id} saved")
    if kill_after is None:
        wait_for(driver, lambda d: any(f"{len(queue)} of {len(queue)} assigned items judged" in t
                                       for t in texts(d, '[data-testid="stProgress"]')), f"{who}'s queue done")


app_queues: dict[str, list[int]] = {}


def type_rationale(driver, label: int) -> None:
    """R opens the rationale box; the digit typed there is text, not a label; Enter leaves the box."""
    before = panel_state(driver)
    press(driver, "r")
    box = wait_for(driver, lambda d: next((b for b in css(d, ".qrs-judge .qj-rationale-box") if b.is_displayed()), None),
                   "the Rationale box")
    assert driver.switch_to.active_element == box
    box.send_keys(RATIONALE + str(label))
    assert panel_state(driver) == before  # typing never labels
    box.send_keys(Keys.BACKSPACE, Keys.ENTER)
    wait_for(driver, lambda d: d.switch_to.active_element.tag_name != "textarea", "the focus back on the panel")


def snapshot(cs: CampaignStore) -> tuple:
    return (sorted((l.item_id, l.annotator, l.label, l.reason, l.rationale) for l in cs.labels(OWNER, CAMPAIGN)),
            len(cs.history(OWNER, CAMPAIGN)), sorted((a.item_id, a.label) for a in cs.adjudications(OWNER, CAMPAIGN)))


# ----------------------------------------------------------------------------- the test
def test_team_campaign_three_annotators_one_killed_owner_adjudicates_and_exports(team_app, e2e_var):
    app = team_app
    names = [who.split("@")[0] for who in TEAM]
    drivers = start_drivers(e2e_var, app.downloads, names)
    cs = CampaignStore(app.db_url)
    app_queues.update(app.queues)
    extra: list = []
    try:
        # --- three annotators at once, one browser each; cat's browser is killed mid-way
        seen = {who: {} for who in TEAM}
        in_flight: list[int] = []
        undone: list[int] = []
        errors: dict[str, str] = {}
        restart = threading.Barrier(len(TEAM), action=app.restart, timeout=WAIT)

        def work(who: str, driver) -> None:
            try:
                judge_queue(driver, app.url, who, seen[who], in_flight, KILL_AFTER if who == KILLED else None,
                            undone, restart)
            except BaseException as exc:  # noqa: BLE001 - reported below, with where it was raised
                restart.abort()  # the others stop waiting for this one
                shot(driver, f"failed-{who.split('@')[0]}")
                errors[who] = "".join(traceback.format_exception(exc))[-3000:]

        side_by_side(work, [(who, drivers[n]) for who, n in zip(TEAM, names)], timeout=300,
                     what="annotator's browser session")  # each session records its own error (above)
        assert not errors, "\n".join(f"{who}: {trace}" for who, trace in errors.items())
        assert app.restarts == 1 and app.server[0].poll() is None
        quit_quietly(drivers.pop(names[2]))

        # --- every committed label is in the store, with its history; the in-flight click at most adds one
        labels = cs.labels(OWNER, CAMPAIGN)
        stored = {who: {l.item_id: l.label for l in labels if l.annotator == who} for who in TEAM}
        for who in TEAM[:2]:
            assert stored[who] == seen[who] and len(seen[who]) == len(app.queues[who]), (who, stored[who], seen[who])
        assert len(seen[KILLED]) == KILL_AFTER and len(in_flight) == 1
        assert seen[KILLED].items() <= stored[KILLED].items(), (seen[KILLED], stored[KILLED])
        assert set(stored[KILLED]) - set(seen[KILLED]) <= set(in_flight)
        print(f"\n[e2e] the click in flight when {KILLED}'s browser was killed "
              + ("was committed" if in_flight[0] in stored[KILLED] else "never reached the server"))
        assert all(l.label == label_of(l.annotator, l.item_id) for l in labels)
        # one write each, who and when kept; bob's undo and his label again are two more
        assert len(undone) == 1 and [(h.who, h.action) for h in cs.history(OWNER, CAMPAIGN)
                                     if h.item_id == undone[0] and h.who == TEAM[1]] == [
            (TEAM[1], "label"), (TEAM[1], "undo"), (TEAM[1], "label")]
        assert len(cs.history(OWNER, CAMPAIGN)) == len(labels) + 2
        ann_second = next(l for l in labels if l.annotator == TEAM[0] and l.item_id == app.queues[TEAM[0]][1])
        assert (ann_second.label, ann_second.rationale) == (2, RATIONALE)  # the key after the rationale, not in it
        assert all(l.annotator in TEAM and l.time is not None for l in labels)

        # --- the killed annotator resumes in a new browser where the store says they stopped
        resumed = start_drivers(e2e_var, app.downloads, ["cat-again"])["cat-again"]
        extra.append(resumed)
        login(resumed, app.url, KILLED)
        open_campaign(resumed, app.url)
        uid, unsaved, _ = wait_for(resumed, panel_state, "the resumed queue")
        left = [i for i in app.queues[KILLED] if i not in stored[KILLED]]
        assert int(uid) == left[0] and unsaved == 0, (uid, left)
        assert any(f"{len(stored[KILLED])} of {len(app.queues[KILLED])} assigned items judged" in t
                   for t in texts(resumed, '[data-testid="stProgress"]'))
        quit_quietly(extra.pop())

        # --- negative: ann opens an item that is not hers by URL: one line, nothing shown, nothing changed
        ann = drivers[names[0]]
        foreign = next(i for i in app.items if i not in app.queues[TEAM[0]])
        before = snapshot(cs)
        open_campaign(ann, app.url, f"Annotate?item={foreign}")
        wait_for(ann, lambda d: css(d, '[data-testid="stAlert"]'), "the refusal")
        idle(ann)
        alerts = texts(ann, '[data-testid="stAlert"] [data-testid="stMarkdownContainer"]')  # the message, not the icon
        shot(ann, "foreign-item")
        assert len(css(ann, '[data-testid="stAlert"]')) == 1 and len(alerts) == 1, alerts
        assert "\n" not in alerts[0] and f"is not assigned to {TEAM[0]}" in alerts[0], alerts
        assert app.items[foreign][2].strip() not in texts(ann, '[data-testid="stText"]')
        assert not css(ann, ".qrs-judge")
        assert snapshot(cs) == before

        # --- negative: an annotator cannot open Compare (nor see it in the sidebar): she judges blind
        ann.get(f"{app.url}/Compare")
        wait_for(ann, lambda d: css(d, '[data-testid="stApp"] h1'), "a page for the annotator")
        idle(ann)
        time.sleep(0.5)
        idle(ann)
        shot(ann, "annotator-compare")
        assert "Compare" not in texts(ann, '[data-testid="stApp"] h1'), texts(ann, '[data-testid="stApp"] h1')
        assert not keyed(ann, "compare.query") and not css(ann, '[data-testid="stDataFrame"] [data-testid^="glide"]')
        listed = texts(ann, '[data-testid="stSidebarNav"] a')
        assert not [t for t in listed if t not in ("", "Annotate")], listed  # no other page in the sidebar

        # --- agreement over what was committed (missing ratings allowed)
        res = cs.agreement(OWNER, CAMPAIGN)
        rated: dict[int, list[int]] = {}
        for l in cs.labels(OWNER, CAMPAIGN):
            if l.label is not None:
                rated.setdefault(l.item_id, []).append(l.label)
        assert res.items == sum(len(v) >= 2 for v in rated.values()) and res.items >= 1
        import krippendorff
        import numpy as np

        annotators = sorted({l.annotator for l in cs.labels(OWNER, CAMPAIGN)})
        item_ids = sorted(rated)
        matrix = np.full((len(annotators), len(item_ids)), np.nan)
        for l in cs.labels(OWNER, CAMPAIGN):
            if l.label is not None:
                matrix[annotators.index(l.annotator), item_ids.index(l.item_id)] = l.label
        assert res.alpha_nominal == pytest.approx(
            krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal", value_domain=[0, 1, 2]))
        conflicts = {c.item_id for c in cs.conflicts(OWNER, CAMPAIGN)}
        assert conflicts == {i for i, v in rated.items() if len(set(v)) > 1} and conflicts

        # --- a visitor who is not logged in (a fresh browser): the login page and nothing else, on every path
        for n in names[:2]:
            quit_quietly(drivers.pop(n))
        visitor = start_drivers(e2e_var, app.downloads, ["visitor"])["visitor"]
        extra.append(visitor)
        before = snapshot(cs)
        for path in ("", "Annotate", "Campaigns", f"Annotate?item={foreign}"):
            visitor.get(f"{app.url}/{path}")
            wait_for(visitor, lambda d: css(d, '[data-testid="stApp"] h1'), f"the page /{path}")
            idle(visitor)
            time.sleep(0.5)  # a second script run would show more here
            idle(visitor)
            assert texts(visitor, '[data-testid="stApp"] h1') == ["Question Retrieval Studio"], path
            assert [b.text.strip() for b in css(visitor, "button") if b.text.strip()] == ["Log in"], path
            assert not css(visitor, 'input, textarea, [data-testid="stDataFrame"], [role="tab"], '
                                    '[data-testid="stSidebarNav"], [data-testid="stText"], [data-testid="stProgress"]')
            alerts = texts(visitor, '[data-testid="stAlert"]')
            assert len(alerts) == 1 and "Log in to judge" in alerts[0], alerts
        shot(visitor, "visitor")
        assert snapshot(cs) == before

        # --- the owner logs in (same browser), adjudicates every conflict on the Campaigns page
        login(visitor, app.url, OWNER)
        visitor.get(f"{app.url}/Campaigns")
        open_tab(visitor, "Adjudicate")
        wait_for(visitor, lambda d: any(f"{len(conflicts)} item(s) where the annotators disagree" in t
                                        for t in texts(d, '[data-testid="stCaptionContainer"]')), "the conflicts")
        idle(visitor)
        shown = {int(m.group(1)) for t in texts(visitor, '[data-testid="stCaptionContainer"]')
                 if (m := re.search(r"· item (\d+)$", t))}
        assert shown == conflicts, (shown, conflicts)
        for item_id in sorted(conflicts):
            pick(visitor, f"campaigns.decide.{item_id}", str(DECISION))
            save = wait_for(visitor, lambda d: next(iter(keyed(d, f"campaigns.save.{item_id}", "button")), None),
                            f"Save of item {item_id}")
            save.click()
            wait_for(visitor, lambda d: item_id in {a.item_id for a in cs.adjudications(OWNER, CAMPAIGN)},
                     f"the decision on item {item_id} in the store")
            idle(visitor)
        adjudicated = {a.item_id: a.label for a in cs.adjudications(OWNER, CAMPAIGN)}
        assert adjudicated == {i: DECISION for i in conflicts}
        assert [h.who for h in cs.history(OWNER, CAMPAIGN) if h.action == "adjudicate"] == [OWNER] * len(conflicts)
        visitor.refresh()  # a new session shows the stored decisions: none undecided; "all" lists them
        open_tab(visitor, "Adjudicate")
        wait_for(visitor, lambda d: any(f"{len(conflicts)} decided" in t for t in
                                        texts(d, '[data-testid="stCaptionContainer"]')), "every decision counted")
        everything = wait_for(visitor, lambda d: next((lab for lab in css(d, '[data-testid="stRadio"] label')
                                                       if lab.text.strip().startswith("all conflicts")), None),
                              "the 'all' filter")
        everything.click()
        wait_for(visitor, lambda d: texts(d, '[data-testid="stCaptionContainer"]').count(f"adjudicated: {DECISION}")
                 == len(conflicts), "every decision shown")
        shot(visitor, "adjudicated")

        # --- agreement on the page; the export: TREC qrels, the rule in the file name
        open_tab(visitor, "Agreement")
        wait_for(visitor, lambda d: any("Krippendorff's α (nominal)" in (c.get_attribute("textContent") or "")
                                        for c in css(d, '[data-testid^="glide-cell-"]')), "the agreement table")
        open_tab(visitor, "Export")
        pick(visitor, "campaigns.rule", "adjudicated")
        wait_for(visitor, lambda d: any(t.startswith("Rule adjudicated") for t in
                                        texts(d, '[data-testid="stCaptionContainer"]')), "the rule's caption")
        for old in app.downloads.glob("*.qrels"):
            old.unlink()
        button(visitor, "Download TREC qrels").click()
        path = wait_for(visitor, lambda d: next(iter(app.downloads.glob(f"{CAMPAIGN}.adjudicated.qrels")), None),
                        "the qrels download")
        shot(visitor, "export")
        rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
        assert rows and all(len(r) == 4 and r[1] == "0" and r[3].isdigit() for r in rows), rows
        qrels, _ = cs.qrels(OWNER, CAMPAIGN, "adjudicated")
        assert {(q, d): int(v) for q, _, d, v in rows} == {(q, d): v for q, docs in qrels.items() for d, v in docs.items()}
        for i in conflicts:
            qid, doc, _ = app.items[i]
            assert qrels[qid][doc] == DECISION
        written = cs.export_qrels(OWNER, CAMPAIGN, app.var, "adjudicated")
        assert written.path.name == f"{CAMPAIGN}.adjudicated.qrels" and written.path.read_text() == path.read_text()
    finally:
        cs.close()
        for d in [*drivers.values(), *extra]:
            quit_quietly(d)
