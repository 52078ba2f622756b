"""What ``make reproduce`` runs: every step (its commands, in order) and the parts that each fit a session.

A part first builds, from an empty ``var/``, the systems its steps read (its seed-13 models), then runs its steps
and the tables; :data:`MAIN` is every step no other part names. The runner and its ledger: ``bench.reproduce``.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.experiments import EXPERIMENTS

__all__ = ["MAIN", "PARTS", "RECIPES", "SEEDS", "WALL", "Part", "Step", "part_names", "part_plan", "steps"]

RECIPES = ("densetrans@paper-objective,frm@kw-loss,densetrans@-AllDense,densetrans@-TopDense,densetrans@+Concat,"
           "sdml-cnn@tl-ssd,sdml-cnn@tl-euc")
SEEDS = ("13", "14", "15", "16", "17")  # training seeds of the recipe studies; 13 is the default build's
SEED_JOBS = {"alone": False, "after": (), "threads": 1}  # one-thread, fixed-seed trainings: executor jobs, any order
WALL = "{wall:default-build}"  # replaced by the ledger's wall time of that step, formatted as GNU time's %E


@dataclass(frozen=True)
class Step:
    """One step of the reproduction: its commands (argument lists after ``python``).

    ``alone``: the step runs by itself in this process (builds start the executor themselves; timed measurements
    must not share the machine). Otherwise each command is an executor job of ``threads`` CPUs that waits for the
    steps named in ``after`` (``None``: every earlier step of its segment, ``bench.plan_jobs``)."""

    name: str
    commands: tuple[tuple[str, ...], ...]
    why: str = ""
    alone: bool = True
    after: tuple[str, ...] | None = None
    threads: int = 1


def steps(dataset: str = "qqp-bimpm") -> list[Step]:
    """Every step, in order (each report's ``command`` field names one of these)."""
    d = ("--dataset", dataset)
    ft = ("-m", "bench.first_stage_train")

    def table3(s: str) -> tuple:
        return tuple((*ft, "densetrans", f"--variant={v}", "--threads", "1", "--tag", f"seed{s}", "--set", f"seed={s}")
                     for v in ("full", "-TopDense", "+Concat", "-AllDense"))

    def sdml(s: str) -> tuple:
        return tuple((*ft, "sdml-cnn", f"--variant={v}", "--threads", "1", "--tag", f"seed{s}", "--set", f"seed={s}")
                     for v in ("sdml", "tl-ssd", "tl-euc"))

    frm = tuple(("-m", "bench.dev_decisions", *d, "--train-frm", r, "--seeds", s)
                for s in SEEDS[1:] for r in ("paper", "kw-loss"))
    return [
        Step("default-build", (("-m", "core", "build", *d, "--all"),), why="the default build, timed"),
        Step("default-build-report", (("-m", "bench.default_build_report", *d, "--wall", WALL,
                                       "--load-note", "make reproduce (bench.reproduce): nothing else scheduled"),)),
        Step("recipes", (("-m", "core", "build", *d, "--systems", RECIPES),), why="the papers' recipes and ablations"),
        Step("recipes-report", (("-m", "bench.default_build_report", *d, "--variants-only"),)),
        Step("paper-objective-ablation", ((*ft, "densetrans", "--variant=-AllDense", "--threads", "2", "--tag",
                                           "paper-objective", "--set", "pooling=cls", "temperature=1.0", "dropout=0.1",
                                           "position_std=0.0"),)),
        # one step per seed: an interrupted run loses at most one seed's trainings
        *(Step(f"table3-seed-{s}", table3(s), why=f"DenseTrans Table 3, seed {s}", **SEED_JOBS) for s in SEEDS[1:]),
        Step("table3", (("-m", "bench.recipe_seeds", "densetrans-ablations", *d, "--seeds", *SEEDS),)),
        *(Step(f"sdml-seed-{s}", sdml(s), why=f"SDML against its triplet-loss baselines, seed {s}", **SEED_JOBS)
          for s in SEEDS[1:]),
        Step("sdml-losses", (("-m", "bench.recipe_seeds", "sdml-losses", *d, "--seeds", *SEEDS),)),
        Step("query-forms", (("-m", "bench.query_forms", *d),)),
        Step("dev-decisions", (("-m", "bench.dev_decisions", *d, "--parts", "tree-k", "int8", "--seeds", *SEEDS[:3]),)),
        Step("frm-seeds", frm, why="FRM's two losses, seeds 14-17", **SEED_JOBS),
        Step("frm-keyword-loss", (("-m", "bench.dev_decisions", *d, "--parts", "frm-keyword-loss", "--seeds", *SEEDS),)),
        Step("frm-pairs", (("-m", "bench.frm_pairs", *d, "--seeds", *SEEDS),)),
        Step("keyword-faithfulness", (("-m", "bench.keyword_faithfulness", *d, "--seeds", "13,14"),),
             why="FRM's own explanations, recipe by recipe and seed by seed (two seeds: about 9 minutes)"),
        Step("explain-faithfulness", (("-m", "bench.explain_faithfulness", *d),),
             why="every system's word importance against random words; the Keywords page's default explanation"),
        Step("query-view-faithfulness", (("-m", "bench.query_view_faithfulness", *d),),
             why="the query view of every system against random words; the amended rule's default on both views"),
        Step("explain-probes", (("-m", "bench.explain_probes", *d),),
             why="the Keywords page's two probes on every system's query view, beside the default (never choosing)"),
        Step("cross-encoder-pairs", (("-m", "bench.cross_encoder_pairs", *d),)),
        Step("layers", (("-m", "bench.layers_curves", "--out", "bench/reports/layers_measures_qqp.json"),)),
        Step("layers-paper-objective", (("-m", "bench.layers_curves", "--pair", "densetrans:paper-objective",
                                         "densetrans:-AllDense#paper-objective", "--sources", "minilm:cls",
                                         "densetrans:paper-objective", "densetrans:-AllDense#paper-objective",
                                         "--out", "bench/reports/layers_measures_qqp_paper_objective.json"),)),
        Step("milvus-parity", (("-m", "bench.milvus_parity", *d),)),
        Step("determinism", (("-m", "bench.determinism", *d, "--busy", "2"),)),
        Step("determinism-rerankers", (("-m", "bench.determinism", *d, "--busy", "1", "--systems", "frm", "cnn-rerank",
                                        "cross-encoder", "--out", "bench/reports/determinism_rerankers.json"),)),
        Step("text-pipeline", (("-m", "bench.text_pipeline"),)),
        Step("table3-seed-tests", (("-m", "bench.seed_tests", "--extra", "full,-AllDense"),)),
        Step("sdml-seed-tests", (("-m", "bench.seed_tests", "--report", "sdml_losses.json", "--metric", "hit_rate@1",
                                  "--order", "sdml", "tl-ssd", "tl-euc", "--extra", "sdml,tl-euc"),)),
        Step("trecqa-cnn-builds", (("-m", "core", "build", "--dataset", "trecqa", "--systems",
                                    "cnn-rerank,cnn-rerank@no-features,cnn-rerank@train-all"),)),
        Step("ppi-simulation", (("-m", "bench.ppi_simulation", "--systems", "bm25,bm25@anserini-default,glove-mean",
                                 "--judge", "cnn-rerank", "--draws", "1000", "--choose-prior-df"),)),
        *(Step(f"experiment-{e.name}", (("-m", "bench", "run", e.name),)) for e in EXPERIMENTS),  # every declared one
        Step("tables", (("-m", "bench.tables"),), why="BENCHMARKS.md's generated tables"),
    ]


@dataclass(frozen=True)
class Part:
    """A slice of the plan that fits one working session from a clean clone: ``systems`` are built first (the
    seed-13 models its steps read), then ``steps`` (names from :func:`steps`, in plan order), then the tables."""

    name: str
    systems: tuple[str, ...]
    steps: tuple[str, ...]
    why: str


PARTS = (
    Part("table3", ("densetrans", "densetrans@-TopDense", "densetrans@+Concat", "densetrans@-AllDense"),
         (*(f"table3-seed-{s}" for s in SEEDS[1:]), "table3", "table3-seed-tests"),
         "DenseTrans's Table 3 over five seeds"),
    Part("sdml", ("sdml-cnn", "sdml-cnn@tl-ssd", "sdml-cnn@tl-euc", "bm25", "dual-encoder", "densetrans"),
         (*(f"sdml-seed-{s}" for s in SEEDS[1:]), "sdml-losses", "sdml-seed-tests", "determinism"),
         "SDML against its triplet-loss baselines over five seeds, and the first stages' second build beside two "
         "busy cores"),
    Part("frm", ("bm25", "frm", "frm@kw-loss", "cross-encoder", "cnn-rerank", "minilm-pairs"),  # frm-pairs reads it
         ("frm-seeds", "frm-keyword-loss", "frm-pairs", "keyword-faithfulness", "determinism-rerankers"),
         "FRM's two losses over five seeds, the paper's pairs, the keyword faithfulness and the rerankers' second "
         "build beside a busy core"),
    Part("trecqa", (), ("trecqa-cnn-builds", "ppi-simulation", "experiment-trecqa-cnn", "experiment-trecqa-cnn-clean"),
         "the Severyn-Moschitti CNN's TrecQA builds, its experiments and the judge simulation"),
)
MAIN = "main"  # every step no other part names: the default build, its reports and the declared experiments


def part_names() -> list[str]:
    """Every part's name, :data:`MAIN` first."""
    return [MAIN, *(p.name for p in PARTS)]


def part_plan(name: str, dataset: str = "qqp-bimpm") -> list[Step]:
    """The steps of part ``name``: its prerequisite build, its own steps in plan order, then the tables (every
    part ends by rendering them). :data:`MAIN` is every step the other parts leave, the default build first."""
    plan = steps(dataset)
    taken = {s for p in PARTS for s in p.steps}
    if name == MAIN:
        return [s for s in plan if s.name not in taken]
    part = next((p for p in PARTS if p.name == name), None)
    if part is None:
        raise ValueError(f"unknown part {name!r}: one of {', '.join(part_names())}")
    build = [Step(f"{name}-prerequisites", (("-m", "core", "build", "--dataset", dataset, "--systems",
                                             ",".join(part.systems)),), why="the seed-13 models its steps read")]
    return [*(build if part.systems else []), *(s for s in plan if s.name in part.steps or s.name == "tables")]
