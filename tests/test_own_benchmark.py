"""Your own benchmark, honestly: a train import and a test import, choices on dev, one final test evaluation.

Runs on the bring-your-own-data fixtures (``tests/byod_env.py``: a BEIR folder user/cqa and a candidate list
user/answers, GloVe replaced by a small seeded table); trainers use their ``smoke`` profile (a wiring check that
measures nothing), everything else is the production code path, the CLI included.
"""
from __future__ import annotations

import json

import pytest

from tests.byod_env import BYOD, byod  # noqa: F401  (byod: a fixture)
from tests.conftest import run_main


def _learning_names():
    """Every (system, variant) of the registry whose build reads labels, with every system that reads none."""
    from core.registry import learns_from_labels, list_systems

    learning, other = [], []
    for spec in list_systems():
        for variant in (None, *spec.variants):
            (learning if learns_from_labels(spec, variant) else other).append((spec.name, variant))
    return learning, other


# ----------------------------------------------------------------------------- refusals
def test_refusals_never_name_a_command_that_trains_on_a_dataset_marked_test(byod):
    from core.data.final_test import is_marked_test, mark_test
    from core.registry import build_command

    learning, other = _learning_names()
    assert learning and other
    for system, variant in learning:  # on an import with its own split: training on its train split is honest
        assert build_command(system, "user/answers", variant).startswith(f"python -m core train --system {system} "
                                                                         "--dataset user/answers")
    for system, variant in other:  # nothing to learn: build, never train
        assert build_command(system, "user/answers", variant).startswith("python -m core build --systems")
    assert mark_test("user/answers") and not mark_test("user/answers") and is_marked_test("user/answers")
    for system, variant in learning:
        command = build_command(system, "user/answers", variant)
        assert "--dataset user/answers" not in command and "marked test" in command, command
        assert "--dataset DATASET" in command and "@DATASET" in command


def test_refusals_name_models_trained_elsewhere_first_and_train_refuses_a_test_import(byod):
    from core.build import train_system
    from core.data.final_test import mark_test

    _cqa, answers = byod
    assert train_system(answers, "cnn-rerank", profile="smoke", force=True).state == "ready"
    code, _out, err = run_main("eval", "--system", "cnn-rerank", "--dataset", "user/cqa")
    assert code == 2 and "Use a model trained elsewhere: cnn-rerank@user/answers; or train on its own train split: " \
                         "python -m core train --system cnn-rerank --dataset user/cqa" in err, err
    mark_test("user/cqa")
    code, _out, err = run_main("eval", "--system", "cnn-rerank", "--dataset", "user/cqa")
    assert code == 2 and "cnn-rerank@user/answers" in err and "--dataset user/cqa" not in err, err
    assert err.index("cnn-rerank@user/answers") < err.index("train on another dataset")
    code, _out, err = run_main("train", "--system", "cnn-rerank", "--dataset", "user/cqa")
    assert code == 2 and err.count("\n") == 1 and "user/cqa is marked test" in err, err
    code, _out, err = run_main("train", "--system", "fusion", "--variant", "bm25+minilm:rrf", "--dataset", "user/cqa")
    assert code == 2 and "marked test" in err, err


# ----------------------------------------------------------------------------- fusion of any parts
def test_fusion_parts_are_any_system_expression_and_untuned_is_a_variant():
    from core.registry import SystemName, parse_name
    from core.retrieval.fusion import chooses_on_dev, parse_variant

    assert parse_name("fusion@run+cross-encoder@qqp-bimpm:rrf".replace("run", "bm25")) == SystemName(
        "fusion", "bm25+cross-encoder@qqp-bimpm:rrf")
    assert parse_name("fusion@bm25+dual-encoder@user/a:wsum@user/a") == SystemName(
        "fusion", "bm25+dual-encoder@user/a:wsum", "user/a")
    assert parse_name("fusion", "bm25+minilm@finetuned:rrf:untuned").variant == "bm25+minilm@finetuned:rrf:untuned"
    spec = parse_variant("bm25+cross-encoder@qqp-bimpm:rrf:untuned")
    assert spec.parts == (("bm25", None), ("cross-encoder@qqp-bimpm", None)) and spec.untuned
    assert spec.variant == "bm25+cross-encoder@qqp-bimpm:rrf:untuned"
    assert not chooses_on_dev(spec.variant) and chooses_on_dev("bm25+minilm:rrf")
    from core.errors import StudioError, UnknownNameError

    with pytest.raises(UnknownNameError):
        parse_variant("bm25+bm25@nope:rrf")  # bm25 trains on nothing: '@nope' can only be a variant
    with pytest.raises(StudioError):
        parse_variant("bm25+minilm:nope")


def _trained_retriever(dataset_name: str) -> None:
    from core.build import train_system
    from core.data.datasets import load_dataset

    status = train_system(load_dataset(dataset_name), "dual-encoder", profile="smoke", force=True)
    assert status.state == "ready", status.error


def test_fusion_tuned_on_one_import_applies_to_another_and_untuned_needs_no_build(byod):
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    _trained_retriever("user/cqa")
    code, _out, err = run_main("train", "--system", "fusion", "--variant", "bm25+dual-encoder:rrf", "--dataset",
                               "user/cqa")
    assert code == 0, err
    answers = load_dataset("user/answers")
    fused = load("fusion@bm25+dual-encoder@user/cqa:rrf@user/cqa", answers)
    assert fused.name == "fusion@bm25+dual-encoder@user/cqa:rrf@user/cqa" and fused.tuned
    assert fused.tuned_on == "tuned on the dev of user/cqa"
    code, out, err = run_main("eval", "--system", "fusion@bm25+dual-encoder@user/cqa:rrf@user/cqa", "--dataset",
                              "user/answers", "--metrics", "map@100")
    assert code == 0 and "map@100" in out, err
    untuned = load("fusion@bm25+dual-encoder@user/cqa:rrf:untuned", answers)
    assert not untuned.tuned and untuned.params == {"k": 60}
    code, _out, err = run_main("eval", "--system", "fusion@bm25+dual-encoder@user/cqa:wsum@user/nope", "--dataset",
                               "user/answers")
    assert code == 2 and "python -m core train --system fusion --dataset user/nope" in err, err


# ----------------------------------------------------------------------------- eval names its headline
def test_eval_names_its_headline_convention_and_takes_another(byod):
    code, out, err = run_main("eval", "--system", "bm25", "--dataset", "user/answers", "--metrics", "map@100")
    assert code == 0, err
    assert "headline convention: answerable (the mean over queries with a relevant item" in out
    code, out, err = run_main("eval", "--system", "bm25", "--dataset", "user/answers", "--metrics", "map@100",
                              "--headline", "all")
    assert code == 0 and "all (headline)" in out and "headline convention: all (the mean over every query" in out


# ----------------------------------------------------------------------------- the whole flow
def test_experiment_trains_on_one_import_chooses_on_its_dev_and_evaluates_once_on_another(byod, tmp_path):
    from core.data.final_test import is_marked_test

    code, _out, err = run_main("eval", "--system", "bm25", "--dataset", "user/answers", "--run-out",
                               str(tmp_path / "organisers.trec"))
    assert code == 0, err
    code, _out, err = run_main("systems", "add", "organisers", "--run", str(tmp_path / "organisers.trec"),
                               "--dataset", "user/answers")
    assert code == 0, err
    try:
        argv = ("experiment", "--name", "mine", "--train", "user/cqa", "--test", "user/answers", "--profile", "smoke",
                "--systems", "bm25,dual-encoder,fusion@bm25+dual-encoder:rrf,fusion@organisers+dual-encoder:rrf:untuned",
                "--baseline", "bm25", "--metrics", "map@100,mrr@100")
        code, out, err = run_main(*argv[:-2], "--dry-run")
        assert code == 0 and not is_marked_test("user/answers"), err  # a dry run writes nothing
        code, out, err = run_main(*argv)
        assert code == 0, err
        commands = [line for line in out.splitlines() if line.startswith("python -m core")]
        assert commands == ["python -m core train --system dual-encoder --dataset user/cqa",
                            "python -m core train --system fusion --dataset user/cqa "
                            "--variant=bm25+dual-encoder@user/cqa:rrf"]
        assert not [c for c in commands if " train " in c and "--dataset user/answers" in c]
        assert is_marked_test("user/answers")
        assert "dev (user/cqa [dev]" in out and "final evaluation on the test labels (user/answers [all]), once" in out
        report = json.loads((tmp_path / "var" / "experiments" / "mine" / "report.json").read_text(encoding="utf-8"))
        assert list(report["test"]) == ["bm25", "dual-encoder@user/cqa", "fusion@bm25+dual-encoder@user/cqa:rrf@user/cqa",
                                        "fusion@organisers+dual-encoder@user/cqa:rrf:untuned"]
        assert list(report["dev"]) == ["bm25", "dual-encoder", "fusion@bm25+dual-encoder@user/cqa:rrf"]
        rows = report["table"]["rows"]
        assert rows[0][2] == "baseline" and all(0 < row[2] <= 1 for row in rows[1:])
        assert report["test"]["bm25"]["n_queries"] == 16
        code, _out, err = run_main(*argv)  # the test labels are read once
        assert code == 2 and "already evaluated on its test labels" in err
    finally:
        run_main("systems", "remove", "organisers")


def test_experiment_bad_input_is_one_line_and_changes_nothing(byod, tmp_path):
    from core.data.final_test import marked_test

    for argv, match in [
        (("--train", "user/cqa", "--test", "user/cqa", "--systems", "bm25"), "same dataset"),
        (("--train", "user/cqa", "--systems", "bm25"), "--train needs --test"),
        (("--dataset", "user/cqa", "--systems", "bm25", "--baseline", "minilm"), "baseline 'minilm'"),
        (("--train", "user/cqa", "--test", "user/answers", "--systems", "bm25,nope"), "unknown system 'nope'"),
    ]:
        code, _out, err = run_main("experiment", "--name", "x", *argv)
        assert code == 2 and err.count("\n") == 1 and match in err, err
    assert marked_test() == [] and not (tmp_path / "var" / "experiments" / "x").exists()


# ----------------------------------------------------------------------------- notes from the build's record
def test_notes_say_what_the_build_recorded_and_how_many_texts_minilm_cuts(byod):
    from transformers import AutoTokenizer

    from core.build import train_system
    from core.registry import deviation_note
    from core.retrieval.minilm_encoder import model_path
    from core.system_notes import system_notes

    _cqa, answers = byod
    assert train_system(answers, "cnn-rerank", profile="smoke", force=True).state == "ready"
    notes = system_notes(answers, "cnn-rerank")
    template = deviation_note("cnn-rerank")
    assert template and template not in notes  # the registration's recipe describes its default build, not this one
    (recorded,) = [n for n in notes if "as built" in n]
    assert "trained on user/answers" in recorded and "train split 10 queries" in recorded
    assert "no interpolation weight was saved" in recorded  # none was chosen: the note does not claim one
    tokenizer = AutoTokenizer.from_pretrained(model_path(), local_files_only=True)
    long_texts = sum(len(ids) > 64 for ids in tokenizer(list(answers.corpus.values()))["input_ids"])
    code, out, err = run_main("eval", "--system", "minilm", "--dataset", "user/answers", "--metrics", "map@100")
    assert code == 0, err
    assert (f"note: minilm: MiniLM reads at most 64 word pieces: 0 of 16 queries and {long_texts} of 96 texts of "
            "user/answers are longer and are cut") in out


def test_cli_trains_sdml_cnn_on_an_imported_candidate_list(byod, monkeypatch):
    from core.retrieval import sdml

    monkeypatch.setitem(sdml.PROFILES, "quick", sdml.PROFILES["smoke"])  # the CLI's default profile, a few steps
    code, out, err = run_main("train", "--system", "sdml-cnn", "--dataset", "user/answers")
    assert code == 0 and "Traceback" not in err and "best_dev_hit_rate@1" in out, err
    code, out, err = run_main("eval", "--system", "sdml-cnn", "--dataset", "user/answers", "--metrics", "map@100")
    assert code == 0 and "sdml-cnn on user/answers" in out, err
