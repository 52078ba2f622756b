"""``python -m core campaign`` on a real database: create (from a pool file or by pooling systems through the
runner), status, assign, agreement and export; bad input is one line and changes nothing; owners and people come
from the configuration."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.data.trec import read_qrels as read_trec_qrels
from core.judging.campaigns import CampaignStore
from tests.campaign_env import OWNER, TEAM


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
