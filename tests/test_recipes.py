"""Names that say what runs: the papers' recipes built beside the defaults.

- ``densetrans@paper-objective``: the paper's objective ([CLS], τ 1, dropout 0.1, PyTorch's default position
  init) at the default build's CPU size; ``frm@kw-loss``: FRM without the keyword-agreement loss;
- each in its own folder: building one leaves the default's files and stored-run fingerprint as they were;
- ``SYSTEM@VARIANT`` parses, loads through the one loader and builds from the CLI and the Models page;
- display names and deviation notes say which recipe runs and what still differs from the paper.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from tests.conftest import app_test, run_main


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of a folder: content hash and mtime (a rewrite with equal bytes still shows)."""
    return {str(p.relative_to(folder)): (hashlib.sha1(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- configs
def test_paper_objective_config_has_the_papers_objective_at_the_default_size():
    from core.retrieval import densetrans as dt

    default, recipe, paper = (dt.make_config("quick"), dt.make_config("quick", "paper-objective"),
                              dt.make_config("paper"))
    # the paper's objective (§3.2.1 [CLS], Eq. (6) on the raw cosine, §4.2.3 dropout 0.1 + default init)
    assert (recipe.pooling, recipe.plan.temperature, recipe.dropout, recipe.position_std) == ("cls", 1.0, 0.1, 0.0)
    assert (paper.pooling, paper.plan.temperature, paper.dropout, paper.position_std) == ("cls", 1.0, 0.1, 0.0)
    assert (default.pooling, default.plan.temperature, default.dropout) == ("mean", 0.05, 0.2)
    # the default build's CPU size, step cap and dev early stopping
    assert recipe.variant == "full" and recipe.d_model == default.d_model == 60
    assert dataclasses.replace(recipe.plan, temperature=default.plan.temperature) == default.plan
    assert recipe.plan.batch_queries == 128 and recipe.plan.max_steps == 600 and recipe.plan.eval_every == 50
    differs = {f.name for f in dataclasses.fields(recipe) if getattr(recipe, f.name) != getattr(default, f.name)}
    assert differs == {"pooling", "dropout", "position_std", "plan"}
    assert dt.make_config("full", "paper-objective").plan.patience == dt.make_config("full").plan.patience
    # ablations keep their architecture and the project recipe
    ablation = dt.make_config("quick", "-AllDense")
    assert ablation.variant == "-AllDense" and ablation.pooling == "mean"
    from core.errors import StudioError

    with pytest.raises(StudioError, match="without a variant"):  # the name would no longer say what runs
        dt.make_config("paper", "paper-objective")


def test_kw_loss_config_is_the_default_recipe_plus_the_keyword_loss():
    from core.errors import StudioError
    from core.rerank import frm as F

    default, recipe = F.FRMTrainConfig.for_variant("quick"), F.FRMTrainConfig.for_variant("quick", "kw-loss")
    assert default.keyword_loss == 0.0 and recipe.keyword_loss == 1.0  # the paper's Eq. (18) alone is the default
    assert dataclasses.replace(recipe, keyword_loss=0.0) == default == F.FRMTrainConfig.for_profile("quick")
    assert F.model_config("kw-loss") == F.model_config()  # the full model
    assert F.FRMTrainConfig.for_variant("quick", "-m_mlp") == default  # ablations train like the default
    with pytest.raises(StudioError, match="without a variant"):
        F.FRMTrainConfig.for_variant("paper", "kw-loss")
    assert F.config_dict("kw-loss")["quick"]["keyword_loss"] == 1.0


# ----------------------------------------------------------------------------- names
@pytest.mark.parametrize("name, system, variant, trained_on", [
    ("densetrans@paper-objective", "densetrans", "paper-objective", None),
    ("densetrans@-AllDense", "densetrans", "-AllDense", None),
    ("densetrans@paper-objective@qqp-bimpm", "densetrans", "paper-objective", "qqp-bimpm"),
    ("frm@kw-loss", "frm", "kw-loss", None),
    ("frm@FRM-1", "frm", "FRM-1", None),
])
def test_names_parse_and_round_trip(name, system, variant, trained_on):
    from core.registry import build_command, parse_name

    parsed = parse_name(name)
    assert (parsed.system, parsed.variant, parsed.trained_on) == (system, variant, trained_on)
    assert str(parsed) == name
    assert build_command(system, "qqp-bimpm", variant).endswith(f"--variant={variant}")


def test_display_names_and_deviation_notes_say_what_runs():
    from core.registry import deviation_note, display_name, get_spec, list_systems, recipe_choices

    assert display_name("densetrans") == "DenseTrans (project recipe: mean, τ .05, d 60)"
    assert display_name("densetrans@paper-objective") == "DenseTrans (paper objective: [CLS], τ 1; d 60, 600-step cap)"
    assert display_name("densetrans@-AllDense") == "DenseTrans -AllDense (project recipe: mean, τ .05, d 60)"
    assert display_name("frm") == "FRM (paper loss, Eq. 18)"
    assert display_name("frm@kw-loss") == "FRM (+ keyword-agreement loss)"
    assert display_name("densetrans@paper-objective@qqp-bimpm").endswith("[trained on qqp-bimpm]")
    assert display_name("bm25") == "BM25"
    assert recipe_choices() == ["densetrans@paper-objective", "frm@kw-loss", "cnn-rerank@train-all"]
    for spec in list_systems():  # every recipe is a variant of its system (parse_name, --variant)
        assert {r.variant for r in spec.recipes} <= set(spec.variants)
    dt_default, dt_paper = deviation_note("densetrans"), deviation_note("densetrans@paper-objective")
    assert dt_default.startswith("densetrans: project recipe") and "τ 0.05" in dt_default
    assert dt_paper.startswith("densetrans@paper-objective: the paper's objective")
    assert "still differs" in dt_paper and "d 60" in dt_paper and "τ 0.05" not in dt_paper
    assert deviation_note("densetrans@-AllDense").endswith(dt_default.split(": ", 1)[1])  # built with the default recipe
    frm_default, frm_kw = deviation_note("frm"), deviation_note("frm@kw-loss")
    assert "Eq. 18 only" in frm_default and "frozen" in frm_default  # the paper's loss, chosen on dev
    assert "plus a keyword-agreement loss" in frm_kw and "not in the paper" in frm_kw
    assert frm_kw.split(": ", 1)[1] != frm_default.split(": ", 1)[1]
    assert get_spec("densetrans@paper-objective").name == "densetrans"


def test_recipes_have_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.data.clusters import dataset_from_pairs
    from core.rerank import frm as F
    from core.retrieval import densetrans as dt

    ds = dataset_from_pairs("toy", "toy", [(1, "a b", "a c", "1")])
    assert dt._folder(ds, "paper-objective").name == "densetrans@paper-objective" != dt._folder(ds, None).name
    assert F._folder(ds, "kw-loss").name == "frm@kw-loss" != F._folder(ds, None).name
    assert dt._served_name("paper-objective") == "densetrans@paper-objective"
    assert dt._served_name("-AllDense") == "densetrans-AllDense" and dt._served_name(None) == "densetrans"
    assert F._served_name("kw-loss") == "frm@kw-loss" and F._served_name("-m_mlp") == "frm-m_mlp"


# ----------------------------------------------------------------------------- a real (tiny) build beside the default
def test_paper_objective_builds_beside_the_default_and_loads_by_name(tmp_path, monkeypatch):
    """The tiny synonym collection of tests/synonym_clusters.py: the default build, then the recipe; the default's
    files and its stored run's fingerprint stay as they were; the loader serves each by its name."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    import numpy as np
    import torch

    from core.analysis import runs
    from core.retrieval import densetrans as dt
    from core.serving.loader import load
    from tests.synonym_clusters import synonym_clusters

    torch.set_num_threads(1)
    toy = synonym_clusters(40)
    tiny = dict(d_model=12, embeddings="random", max_steps=8, eval_every=4, batch_queries=16, dev_distractors=0)
    dt.build(toy, "quick", config=dt.make_config("quick", None, **tiny))
    default_folder = dt._folder(toy, None)
    before, fingerprint = _snapshot(default_folder), runs.fingerprint(toy, "densetrans")
    metrics = dt.build(toy, "quick", variant="paper-objective", config=dt.make_config("quick", "paper-objective", **tiny))
    assert metrics["training"]["curve"] and dt.is_built(toy, "paper-objective")
    assert _snapshot(default_folder) == before  # building the recipe did not touch the default model
    assert runs.fingerprint(toy, "densetrans") == fingerprint  # nor made the default's stored run stale
    assert runs.fingerprint(toy, "densetrans", "paper-objective") != fingerprint
    import json

    saved = json.loads((dt._folder(toy, "paper-objective") / "config.json").read_text(encoding="utf-8"))
    assert (saved["pooling"], saved["plan"]["temperature"], saved["dropout"], saved["position_std"]) == ("cls", 1.0, 0.1, 0.0)
    recipe, default = load("densetrans@paper-objective", toy), load("densetrans", toy)
    assert recipe.name == "densetrans@paper-objective" and default.name == "densetrans"
    assert recipe.encoder.model.pooling == "cls" and default.encoder.model.pooling == "mean"
    assert not np.allclose(recipe.doc_vectors, default.doc_vectors)
    assert load("densetrans", toy, variant="paper-objective").name == "densetrans@paper-objective"
    from core.errors import MissingArtifactError

    with pytest.raises(MissingArtifactError, match="--variant=-AllDense"):  # the ablations still resolve by name
        load("densetrans@-AllDense", toy)


def test_cli_trains_and_evaluates_the_recipe_by_name(tiny_data, fresh_var, monkeypatch):
    """``python -m core train --system densetrans --variant paper-objective`` on the tiny QQP fixture (its steps
    cut for the test), then ``eval`` names the recipe and prints its own deviation note; ``systems`` lists it."""
    from core.retrieval import densetrans as dt

    monkeypatch.setitem(dt.RECIPES, "paper-objective", {**dt.RECIPES["paper-objective"], "d_model": 12, "max_steps": 6,
                                                        "eval_every": 3, "batch_queries": 16, "dev_distractors": 0})
    code, out, err = run_main("train", "--system", "densetrans", "--variant", "paper-objective")
    assert code == 0, err
    assert (fresh_var / "systems" / "qqp-bimpm" / "densetrans@paper-objective" / "model.pt").is_file()
    assert not (fresh_var / "systems" / "qqp-bimpm" / "densetrans" / "model.pt").exists()
    code, out, err = run_main("eval", "--system", "densetrans@paper-objective", "--split", "test", "--metrics", "recall@10")
    assert code == 0, err
    assert "densetrans@paper-objective on qqp-bimpm [test:" in out
    assert "what runs: densetrans@paper-objective = DenseTrans (paper objective: [CLS], τ 1; d 60, 600-step cap)" in out
    assert "note: densetrans@paper-objective: the paper's objective" in out and "τ 0.05" not in out
    code, out, err = run_main("systems")
    line = next(row for row in out.splitlines() if row.startswith("densetrans@paper-objective"))
    assert "ready" in line and "paper objective" in line
    before = _snapshot(fresh_var / "systems" / "qqp-bimpm" / "densetrans@paper-objective")
    code, out, err = run_main("train", "--system", "densetrans", "--variant", "paper-objective", "--profile", "paper",
                              "--force")
    assert code == 2 and "without a variant" in err  # its name would no longer say what runs: refused, nothing changed
    assert _snapshot(fresh_var / "systems" / "qqp-bimpm" / "densetrans@paper-objective") == before


def test_build_verb_takes_system_at_variant(tiny_data, fresh_var, monkeypatch):
    """The Models page's "Build one system" runs ``python -m core build --systems densetrans@paper-objective``."""
    from dataclasses import asdict

    import core.build as build
    from core import executor

    calls = []

    def run_jobs(jobs, on_event=None, retries=3):  # the executor's jobs, as the CLI made them (none run)
        out = {}
        for job in jobs:
            _, name, variant, profile, _ = job.args
            calls.append((name, variant, profile))
            out[job.key] = executor.JobResult(job.key, asdict(build.BuildStatus(name, "ready")))
        return out

    monkeypatch.setattr(executor, "run_jobs", run_jobs)
    code, out, err = run_main("build", "--systems", "densetrans@paper-objective,frm@kw-loss,bm25")
    assert code == 0, err
    assert calls == [("densetrans", "paper-objective", "quick"), ("frm", "kw-loss", "quick"), ("bm25", None, "quick")]
    assert "densetrans@paper-objective" in out and "frm@kw-loss" in out


# ----------------------------------------------------------------------------- pages
def test_models_page_builds_a_recipe_and_shows_what_runs(built, monkeypatch):
    import core.build as build

    at = app_test("pages/6_Models.py").run()
    assert not at.exception, at.exception
    status = next(df.value for df in at.dataframe if "what runs" in df.value.columns and "state" in df.value.columns)
    rows = status.set_index("system")
    assert rows.loc["densetrans@paper-objective", "what runs"] == "DenseTrans (paper objective: [CLS], τ 1; d 60, 600-step cap)"
    assert rows.loc["densetrans", "what runs"] == "DenseTrans (project recipe: mean, τ .05, d 60)"
    assert rows.loc["frm@kw-loss", "what runs"] == "FRM (+ keyword-agreement loss)"
    assert rows.loc["densetrans@paper-objective", "state"] == "not built"
    assert not (built / "systems" / "qqp-bimpm" / "densetrans@paper-objective").exists()  # asking creates nothing
    pick = at.selectbox(key="models.build_one")
    assert {"densetrans@paper-objective", "frm@kw-loss", "densetrans", "frm"} <= set(pick.options)
    calls = []
    monkeypatch.setattr(build, "start_background_build", lambda *a, **k: calls.append((a, k)) or True)
    pick.set_value("densetrans@paper-objective").run()
    next(b for b in at.button if b.label == "▶ Build densetrans@paper-objective").click().run()
    assert not at.exception, at.exception
    assert calls == [(("qqp-bimpm", "quick"), {"systems": ["densetrans@paper-objective"]})]
    captions = [c.value for c in at.caption]
    assert any("densetrans@paper-objective: the paper's objective" in c for c in captions)


def test_compare_offers_recipes_with_their_index_knobs(built):
    from core.data.datasets import load_dataset
    from core.judging.compare_state import CompareState
    from core.transfer import system_choices

    ds = load_dataset("qqp-bimpm")
    retrievers, rerankers = system_choices(ds, "retriever"), system_choices(ds, "reranker")
    assert retrievers.index("densetrans@paper-objective") == retrievers.index("densetrans") + 1
    assert "frm@kw-loss" in rerankers
    state = CompareState("qqp-bimpm", "q", None, ("densetrans@paper-objective", "densetrans@qqp-bimpm"), (), "bm25",
                         20, 10, None, "ivf", 7)
    opts = {c.name: dict(c.options) for c in state.choices()}
    assert opts["densetrans@paper-objective"] == {"index": "ivf", "nprobe": 7}
    assert opts["densetrans@qqp-bimpm"] == {}  # a model trained elsewhere serves with its own index


def test_no_kw_loss_builds_beside_the_default_and_loads_by_name(tmp_path, monkeypatch):
    """FRM on four QQP-like pairs (as tests/test_frm.py's tiny_frm): the default, then ``frm@kw-loss`` with its
    own quick recipe; the default's files stay as they were and each loads by its name."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    import json

    import torch

    from core.data.clusters import dataset_from_pairs
    from core.rerank import frm as F
    from core.serving.loader import load

    torch.set_num_threads(1)
    rows = [(1, "How can I stop my depression ?", "How do I overcome depression ?"),
            (0, "How can I stop my depression ?", "What is the capital of France ?"),
            (1, "What is the best phone to buy ?", "Which phone should I buy ?"),
            (0, "How to keep the mobile phone cool ?", "How to keep the mobile phone fast ?")] * 2
    ds = dataset_from_pairs("tiny", "tiny", [(l, a, b, str(i)) for i, (l, a, b) in enumerate(rows)], tokenized=True)
    ds.pairs["train"] = ds.pairs["dev"] = ds.pairs["all"]
    F.build(ds, train_config=F.FRMTrainConfig(max_epochs=1, batch_size=4, eval_every=2))
    before = _snapshot(F._folder(ds, None))
    F.build(ds, variant="kw-loss")  # FRMTrainConfig.for_variant("quick", "kw-loss"): 3 epochs of these pairs
    assert F.is_built(ds, "kw-loss") and _snapshot(F._folder(ds, None)) == before
    saved = json.loads((F._folder(ds, "kw-loss") / "config.json").read_text(encoding="utf-8"))
    default = json.loads((F._folder(ds, None) / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["keyword_loss"] == 1.0 and default["train"]["keyword_loss"] == 0.0
    assert saved["model"] == default["model"]
    recipe, plain = load("frm@kw-loss", ds), load("frm", ds)
    assert recipe.name == "frm@kw-loss" and plain.name == "frm"
    pair = (["How can I stop my depression ?"], ["How do I overcome depression ?"])
    assert recipe.score_pairs(*pair)[0] != pytest.approx(plain.score_pairs(*pair)[0], abs=1e-6)
