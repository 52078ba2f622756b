"""The notes beside a system's numbers: one function for the CLI and the pages, a model trained with another
profile than the default build's says so (its display name and deviation note describe the default build)."""
from __future__ import annotations


def test_a_paper_profile_model_says_so_in_eval_and_compare(built):
    from core.system_notes import profile_note, system_notes
    from core.data.datasets import load_dataset
    from tests.conftest import app_test, run_main

    dataset = load_dataset("qqp-bimpm")
    assert profile_note(dataset.name, "dual-encoder") is None  # not built: nothing to say
    code, _, err = run_main("train", "--system", "dual-encoder", "--profile", "paper")
    assert code == 0, err
    note = profile_note(dataset.name, "dual-encoder")
    assert note is not None and "--profile paper" in note
    assert note in system_notes(dataset, "dual-encoder")
    code, out, err = run_main("eval", "--system", "dual-encoder", "--split", "test", "--metrics", "hit_rate@1")
    assert code == 0, err
    assert f"note: {note}" in out
    at = app_test("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25", "dual-encoder"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast?").run()
    assert not at.exception
    assert any("--profile paper" in c.value for c in at.caption), [c.value for c in at.caption]
    assert profile_note(dataset.name, "bm25") is None  # BM25 has no training profile


def test_the_default_profile_and_other_datasets_add_no_note(built):
    from core.system_notes import profile_note, system_notes
    from core.data.datasets import load_dataset
    from tests.conftest import run_main

    code, _, err = run_main("train", "--system", "dual-encoder")
    assert code == 0, err
    assert profile_note("qqp-bimpm", "dual-encoder") is None
    assert profile_note("qqp-bimpm", "dual-encoder@trecqa") is None  # a model trained elsewhere: not this folder
    assert profile_note("qqp-bimpm", "no-such-system") is None
    notes = system_notes(load_dataset("qqp-bimpm"), "densetrans")  # not built: its deviation note alone
    assert len(notes) == 1 and "project recipe" in notes[0] and "was trained with" not in notes[0]
