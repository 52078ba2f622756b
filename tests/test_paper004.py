"""The ``paper-004`` query split (tree-search-bert-guo.md §4.1): the first question of each positive pair."""
from __future__ import annotations

import pytest

from core.data.datasets import load_dataset
from core.data.loaders import PAPER_004_SPLIT


def test_paper_004_is_the_first_question_of_each_positive_pair(tiny_data):
    ds = load_dataset("qqp-bimpm")
    positives = [p for p in ds.pairs["all"] if p.label > 0]
    split = ds.query_splits[PAPER_004_SPLIT]
    assert split == list(dict.fromkeys(p.id1 for p in positives))  # every pair's first question, once, in order
    assert {p.id1 for p in positives} == set(split)
    second_only = {p.id2 for p in positives} - {p.id1 for p in positives}
    assert second_only and not second_only & set(split)  # second questions are not queries (unlike "all")
    # the hand-made transitive cluster at the end of the fixture: its first questions are queries
    rows = (tiny_data / "qqp-bimpm" / "test.tsv").read_text(encoding="utf-8").splitlines()
    text_to_id = {t: q for q, t in ds.corpus.items()}
    for line in rows[-3:]:
        label, t1, _t2, _pid = line.split("\t")
        if int(label) > 0:
            assert text_to_id[t1.strip()] in split
    qrels = ds.split_qrels(PAPER_004_SPLIT)
    assert set(qrels) == set(split) and all(q not in rel for q, rel in qrels.items())


def test_paper_004_eval_cli(built, capsys):
    from core.cli.main import main

    assert main(["eval", "--system", "bm25", "--split", "paper-004", "--k", "20", "--metrics", "map@20,hit_rate@1"]) == 0
    out = capsys.readouterr().out
    ds = load_dataset("qqp-bimpm")
    assert f"[paper-004: {len(ds.query_splits['paper-004']):,} queries; query form: tokenized]" in out and "H@1" in out


def test_unknown_split_is_one_clear_error(tiny_data):
    from core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="paper-004"):
        load_dataset("qqp-bimpm").split_queries("paper-4")
