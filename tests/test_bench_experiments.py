"""bench/ as a client of core: every module imports, no module edits sys.path, and every declared experiment
runs end to end (build, rank through core.serving, score through evaluate_contract, write its report) on
fixture datasets: the tiny QQP fixture and a TrecQA cut to its first questions of every split. The learned
systems build with the ``smoke`` training profile (a few optimiser steps): the test checks the wiring, not the
models, which the declared experiments build with the quick profile."""
from __future__ import annotations

import importlib
import json

import pytest

from tests.conftest import ROOT, TINY_DATA

pytestmark = pytest.mark.usefixtures("shared_ray")  # the experiments' builds and cells join one Ray per session

BENCH_MODULES = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")
TRECQA_FOLDERS = ("train", "train-all", "raw-dev", "raw-test", "clean-dev", "clean-test")


@pytest.mark.parametrize("module", BENCH_MODULES)
def test_every_bench_module_imports(module):
    importlib.import_module(f"bench.{module}")


def test_no_bench_module_edits_sys_path():
    offenders = [p.name for p in (ROOT / "bench").rglob("*.py") if "sys.path" in p.read_text(encoding="utf-8")]
    assert offenders == []


def _cut_trecqa(target, questions: int = 4) -> None:
    """The first ``questions`` question groups of every TrecQA folder (train-all read from its .gz files)."""
    from core.data.loaders import _read_token_file

    source = ROOT / "data" / "trecqa" / "toks"
    for folder in TRECQA_FOLDERS:
        files = {n: _read_token_file(source / folder / n) for n in ("a.toks", "b.toks", "id.txt", "sim.txt")}
        keep = list(dict.fromkeys(files["id.txt"]))[:questions]
        rows = [i for i, q in enumerate(files["id.txt"]) if q in keep]
        (target / folder).mkdir(parents=True)
        for name, lines in files.items():
            (target / folder / name).write_text("\n".join(lines[i] for i in rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def fixture_data(tmp_path_factory):
    """QRS_DATA with the QQP fixture and a cut TrecQA; a private QRS_VAR shared by the module's runs."""
    root = tmp_path_factory.mktemp("data")
    (root / "qqp-bimpm").symlink_to(TINY_DATA / "qqp-bimpm", target_is_directory=True)
    _cut_trecqa(root / "trecqa" / "toks")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(root))
        mp.setenv("QRS_VAR", str(tmp_path_factory.mktemp("var")))
        yield root


def test_cut_trecqa_has_train_all_as_a_split(fixture_data):
    from core.data.datasets import load_dataset

    ds = load_dataset("trecqa")
    assert len(ds.query_splits["train-all"]) == 4 and len(ds.query_splits["train"]) == 4
    assert all(q.startswith("train-all/") for q in ds.query_splits["train-all"])


def _experiments():
    from bench.experiments import EXPERIMENTS

    return EXPERIMENTS


@pytest.mark.parametrize("exp", _experiments(), ids=lambda e: e.name)
def test_every_experiment_runs_on_a_fixture(exp, fixture_data, tmp_path):
    from bench.runner import SCORER, run_experiment

    out = tmp_path / "report.json"
    report = run_experiment(exp, build=True, out=out, progress=lambda m: None, profile="smoke")
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["build_profile"] == "smoke"
    assert saved["experiment"] == exp.name and saved["scorer"] == SCORER and saved["ties"] == "trec_eval"
    assert saved["command"] and saved["commit"] is not None and saved["tie_rule"]
    assert list(saved["systems"]) == list(exp.systems)
    for name, row in report["systems"].items():
        ev = row["evaluation"]
        assert ev["n_queries"] == report["queries"] > 0 and set(ev["all"]) == set(exp.measures), name
        assert all(v is None or 0.0 <= v <= 1.0 for v in ev["all"].values())
    assert len(saved["tests"]) == (len(exp.systems) - 1) * len(exp.measures)
    assert all(t["p"] <= t["p_holm"] <= 1.0 for t in saved["tests"])


def test_smoke_profile_caps_the_learned_systems_and_an_unknown_profile_is_refused(fixture_data, tmp_path):
    from bench.experiments import get_experiment
    from bench.runner import run_experiment
    from core.errors import UnknownNameError
    from core.rerank import cnn
    from core.retrieval import densetrans, dual_encoder

    assert densetrans.make_config("smoke").plan.max_steps <= 10 < densetrans.make_config("quick").plan.max_steps
    assert dual_encoder.make_config("smoke").plan.max_steps <= 10 < dual_encoder.make_config("quick").plan.max_steps
    assert cnn.train_config_for("smoke", "train-all").epochs_for(10_000) == 1 < cnn.train_config_for("quick").epochs_for(10_000)
    with pytest.raises(UnknownNameError):
        run_experiment(get_experiment("qqp-first-stage"), build=True, out=tmp_path / "r.json", profile="no-such")
    assert not (tmp_path / "r.json").exists()


def test_holm_adjustment():
    from core.analysis.significance import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


def test_list_and_unknown_experiment(capsys):
    from bench.__main__ import main

    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(e.name in listed for e in _experiments())
    assert main(["run", "no-such-experiment"]) == 2
    assert "unknown experiment" in capsys.readouterr().err


def test_train_all_is_a_registered_recipe():
    from core.registry import parse_name, recipe

    assert str(parse_name("cnn-rerank@train-all")) == "cnn-rerank@train-all"
    assert recipe("cnn-rerank@train-all") is not None


def test_ppi_simulation_runs_on_the_cut_trecqa(fixture_data, tmp_path):
    """bench.ppi_simulation end to end on four test questions: soft judge, both designs, the verdict."""
    from bench.ppi_simulation import main

    out = tmp_path / "ppi.json"
    assert main(["--systems", "bm25,bm25@anserini-default", "--judge", "bm25", "--draws", "5", "--samples", "8",
                 "--choose-prior-df", "--dev-draws", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    choice = report["prior_df_choice"]
    assert set(choice["candidates"]) == {"1", "2", "4", "8", "inf"} and "rule" in choice
    assert report["calibration_features"] in ("score", "score+query")
    assert set(report["results"]) == {"0.05", "0.10", "0.25", "0.50"}
    assert set(report["verdict"]) == {"uniform", "budget-aware"} and report["soft_judge_samples"] == 8
    for design in ("uniform", "budget-aware"):
        cell = report["results"]["0.50"][design]["map@100"]
        assert 0.0 <= cell["coverage_ppi"] <= 1.0 and cell["width_ppi"] >= 0.0 and cell["draws"] == 5


def _kw_row(system, method, seed, faithful=True, plausible=True, rho=0.4, stop=0.1):
    return {"system": system, "method": method, "seed": seed, "split": "dev", "faithful": faithful,
            "plausible": plausible, "spearman_idf": rho, "stop_share_top2": stop,
            "comprehensiveness": {"top": .3, "random": .1, "bottom": .05}, "sufficiency": {"top": .2, "random": .4, "bottom": .5}}


def test_keyword_decision_rule_on_dev_rows():
    """bench.keyword_faithfulness.decide: the passing recipe's w wins; with none passing on every seed, the higher
    dev AUC stays the default and the report says its view does not pass on dev (with the failing seed)."""
    from bench.keyword_faithfulness import decide, failures

    recipes = {"frm": {"dev_auc_mean": .90}, "frm@kw-loss": {"dev_auc_mean": .89}}
    rows = [_kw_row("frm", "w", 13, plausible=False, rho=-.3, stop=.58), _kw_row("frm", "gradient", 13),
            _kw_row("frm@kw-loss", "w", 13), _kw_row("frm@kw-loss", "gradient", 13, faithful=False)]
    d = decide(rows, recipes)
    assert d["frm_default_recipe"] == "frm@kw-loss" and d["default"] == {"system": "frm@kw-loss", "method": "w"}
    assert d["default_passes_dev"] and "fails the checks on dev" in d["paper_loss_note"]
    rows[2] = _kw_row("frm@kw-loss", "w", 13, plausible=False, stop=.26)
    rows[1] = _kw_row("frm", "gradient", 13, plausible=False)
    d = decide(rows, recipes)
    assert d["default"] == {"system": "frm", "method": "w"} and d["default_passes_dev"] is False
    assert "frm@kw-loss w seed 13: Spearman(IDF) +0.40, stop words in top-2 26%" in failures(rows)


def test_system_entries_carry_serving_options_and_bad_ones_are_refused():
    from bench.experiments import Experiment, system_entry

    assert system_entry("bm25") == ("bm25", ())
    assert system_entry("tree-bert[K=5,beam=20]") == ("tree-bert", (("K", "5"), ("beam", "20")))
    for bad in ("tree-bert[K=5", "tree-bert[K]", "[K=5]", "tree-bert[K=5,]"):
        with pytest.raises(ValueError):
            system_entry(bad)
    with pytest.raises(ValueError):
        Experiment("x", "x", dataset="trecqa", split="test", systems=("bm25", "tree-bert[beam]"), measures=("map@20",))


def test_search_stats_summarise_each_rankings_costs():
    from bench.runner import search_stats
    from core.retrieval.base import Ranking

    run = {f"q{i}": Ranking("tree", ["d"], [1.0], 0.0, {"distance_computations": 100 + i, "label": "x"})
           for i in range(11)}
    stats = search_stats(run)
    assert set(stats) == {"distance_computations"}
    assert stats["distance_computations"]["mean"] == 105 and stats["distance_computations"]["queries"] == 11
    assert stats["distance_computations"]["p10"] == 101 and stats["distance_computations"]["p90"] == 109
    assert search_stats({"q": Ranking("bm25", ["d"], [1.0], 0.0, {})}) == {}


def test_recipe_studies_name_each_models_folder_and_command():
    from bench.recipe_seeds import BUILT_SEED, STUDIES

    dt, sdml = STUDIES["densetrans-ablations"], STUDIES["sdml-losses"]
    assert dt.folder_variant("full", BUILT_SEED) is None and dt.folder_variant("-TopDense", BUILT_SEED) == "-TopDense"
    assert dt.folder_variant("full", 14) == "full+seed14" and sdml.folder_variant("sdml", 15) == "sdml+seed15"
    assert sdml.command("tl-ssd", BUILT_SEED) == "python -m core build --systems sdml-cnn@tl-ssd"
    assert "--variant=tl-euc --threads 1 --tag seed16 --set seed=16" in sdml.command("tl-euc", 16)
    for study in STUDIES.values():
        assert study.primary in study.measures and study.default_variant in study.variants


def test_seed_tests_pair_by_seed_and_test_an_extra_step(tmp_path, monkeypatch):
    import bench.seed_tests as st

    def runs(values):
        return {"runs": [{"seed": s, "hit_rate@1": v} for s, v in values.items()]}

    report = {"commit": "x", "variants": {"a": runs({13: .60, 14: .61, 15: .62}), "b": runs({13: .50, 14: .52, 15: .51}),
                                          "c": runs({13: .40, 14: .43, 15: .41})}}
    monkeypatch.setattr(st, "REPORTS", tmp_path)
    (tmp_path / "r.json").write_text(json.dumps(report), encoding="utf-8")
    assert st.main(["--report", "r.json", "--metric", "hit_rate@1", "--order", "a", "b", "c", "--extra", "a,c"]) == 0
    out = json.loads((tmp_path / "r_seed_tests.json").read_text(encoding="utf-8"))
    assert [s["step"] for s in out["steps"]] == ["a > b", "b > c", "a > c"]
    assert out["steps"][2]["mean_difference"] == pytest.approx(0.19667, abs=1e-4) and out["n_seeds"] == 3
    assert "fewer than the 5" in out["seeds_note"]


def test_p_values_in_reports_keep_two_significant_digits_and_are_never_zero():
    from bench.seed_stats import p_value

    assert p_value(4.2e-07) == 4.2e-07 and p_value(0.01234) == 0.012 and p_value(1.0) == 1.0


def test_ppi_cells_on_the_executor_give_the_numbers_of_one_loop():
    """bench.ppi_cells.simulate runs each (budget, design) cell as an executor job: the same numbers as the
    cells computed one after another here (each seeds its own generator)."""
    import numpy as np

    from bench.ppi_cells import DESIGNS, METRICS, simulate, simulate_cell
    from core.analysis.ppi import PRIOR_DF

    rng = np.random.default_rng(0)
    n, systems = 24, ["a", "b"]
    human = {m: [rng.random(n), rng.random(n)] for m in METRICS}
    soft = {m: [h + rng.normal(0, 0.05, n) for h in human[m]] for m in METRICS}
    model_var = {m: {0: np.full(n, 0.01), 1: np.full(n, 0.01), (0, 1): np.full(n, 0.02)} for m in METRICS}
    uncertainty, n_labels = rng.random(n) + 0.1, rng.integers(1, 5, n)
    budgets = (0.25, 0.5)
    on_executor = simulate(human, soft, model_var, uncertainty, budgets, 7, 3, systems, n_labels)
    one_loop = {f"{b:.2f}": {d: simulate_cell(human, soft, model_var, uncertainty, b, d, 7, 3, systems, n_labels,
                                              PRIOR_DF) for d in DESIGNS} for b in budgets}
    assert on_executor == one_loop


def test_explain_decision_rule_on_dev_rows():
    """bench.explain_decision.decide: only explanations more faithful than random compete; plausible ones first;
    then the largest gain; none faithful: no default (the page keeps its earlier one)."""
    from bench.explain_decision import decide

    def row(system, method, faithful, plausible, gain):
        return {"system": system, "method": method, "more_faithful_than_random": faithful, "plausible": plausible,
                "gain": gain, "median_ms": 1.0}

    rows = [row("a", "occlusion", True, False, 3.0), row("b", "occlusion", True, True, 1.0),
            row("c", "occlusion", False, True, 9.0)]
    assert decide(rows)["default"] == {"system": "b", "method": "occlusion"}
    assert decide(rows[:1])["default"] == {"system": "a", "method": "occlusion"}
    assert decide(rows[2:])["default"] is None
