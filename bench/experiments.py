"""Declared experiments: what is compared, on which data, by which measures and which statistical test.

An :class:`Experiment` names systems by their registration (``SYSTEM[@VARIANT]``, user systems
included: ``core.registry``), a dataset and a query split, the measures (``core.evaluation``
names), the training seeds its claim rests on, and the paired test. ``bench.runner.run_experiment``
runs one: every ranking from ``core.serving.runner.rank_many``, every number from ``evaluate_contract``,
one report through ``bench.reporting``. ``python -m bench list`` prints them, ``python -m bench run NAME``
runs one.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.errors import UnknownNameError

TESTS = ("randomization", "student")
QQP_COLLECTION = 36_737  # questions in qqp-bimpm's collection: the paper-shape trees' leaves hold N/K^3 of them


def system_entry(entry: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """An experiment's system entry, ``NAME[@VARIANT]`` or ``NAME[@VARIANT][key=value,...]`` (serving options
    the system's loader takes, e.g. ``tree-bert[K=5,beam=20]``): the registered name and its options."""
    name, bracket, rest = entry.partition("[")
    if not bracket:
        return entry, ()
    if not rest.endswith("]") or not name:
        raise ValueError(f"system entry {entry!r}: expected NAME[key=value,...]")
    options = []
    for part in rest[:-1].split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"system entry {entry!r}: option {part!r} is not key=value")
        options.append((key.strip(), value.strip()))
    return name, tuple(options)


@dataclass(frozen=True)
class Experiment:
    """One comparison: systems against a baseline on a dataset's split, per-query paired tests with Holm."""

    name: str
    title: str
    dataset: str
    split: str
    systems: tuple[str, ...]  # registered names, SYSTEM[@VARIANT]; the first is the baseline of the tests
    measures: tuple[str, ...]
    test: str = "randomization"  # paired per-query test of each system against the baseline; Holm across them
    seeds: tuple[int, ...] = (13,)  # training seeds of the built models (the registry's default build: 13)
    first_stage: str | None = None  # rerankers on a collection rescore this system's top ``depth``
    depth: int = 20
    k: int | None = None  # ranking depth; None: 1000 on candidate lists, 100 on a collection (at least ``depth``)
    paper: str = ""  # the paper file and table the experiment speaks to
    report: str = ""  # bench/reports/<report>; default: experiment_<name>.json

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise UnknownNameError("statistical test", self.test, list(TESTS))
        if len(self.systems) < 1 or len(set(self.systems)) != len(self.systems):
            raise ValueError(f"experiment {self.name}: systems must be distinct and at least one")
        for entry in self.systems:
            system_entry(entry)

    @property
    def report_name(self) -> str:
        return self.report or f"experiment_{self.name}.json"

    @property
    def baseline(self) -> str:
        return self.systems[0]


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        "trecqa-cnn", "Severyn-Moschitti CNN on TrecQA raw TEST: TRAIN with and without overlap features, TRAIN-ALL",
        dataset="trecqa", split="test",
        systems=("cnn-rerank", "cnn-rerank@no-features", "cnn-rerank@train-all"),
        measures=("map@1000", "mrr@1000"),
        paper="cnn-rerank-severyn2015.md Tables 2-3"),
    Experiment(
        "trecqa-cnn-clean", "The same CNN builds on TrecQA clean TEST (questions with both kinds of candidate)",
        dataset="trecqa", split="clean-test",
        systems=("cnn-rerank", "cnn-rerank@no-features", "cnn-rerank@train-all"),
        measures=("map@1000", "mrr@1000"),
        paper="cnn-rerank-severyn2015.md Table 3 (clean TEST is the later convention of Rao et al. 2016)"),
    Experiment(
        "qqp-first-stage", "First stages on QQP held-out test queries: BM25, the DualEncoder, DenseTrans",
        dataset="qqp-bimpm", split="test",
        systems=("bm25", "dual-encoder", "densetrans"),
        measures=("mrr@100", "map@100", "ndcg@10", "recall@100"),
        paper="densetrans-cai2021.md Table 2"),
    Experiment(
        "qqp-sdml", "SDML-CNN against its triplet-loss baselines TL (Rand) with SSD and Euclidean distance, QQP test",
        dataset="qqp-bimpm", split="test",
        systems=("sdml-cnn", "sdml-cnn@tl-ssd", "sdml-cnn@tl-euc"),
        measures=("hit_rate@1", "hit_rate@10", "mrr@100"),
        paper="sdml-bonadiman2019.md Table 4"),
    Experiment(
        "qqp-rerank-cnn", "The CNN reranker over BM25's top 20 on QQP held-out test queries, against BM25 alone",
        dataset="qqp-bimpm", split="test",
        systems=("bm25", "cnn-rerank"), first_stage="bm25", depth=20,
        measures=("map@20", "mrr@100", "precision@1"),
        paper="cnn-rerank-severyn2015.md §3 applied to question retrieval"),
    Experiment(
        "qqp-tree", "Tree-search BERT against compute-all on the paper's QQP protocol (paper-004 queries, top 20): "
        "K = 5, 8, 10 with leaves of at most K questions, and trees of the paper's shape (5 levels: leaves of "
        "about N/K^3 questions)",
        dataset="qqp-bimpm", split="paper-004",
        systems=("minilm@mean",
                 "tree-bert[K=5,beam=20]", "tree-bert[K=8,beam=20]", "tree-bert[K=10,beam=20]",
                 *(f"tree-bert[K={k},beam=20,leaf_size={-(-QQP_COLLECTION // k**3)}]" for k in (5, 8, 10))),
        measures=("map@20", "precision@1", "mrr@20", "ndcg@20", "mrr@10"), k=20,
        paper="tree-search-bert-guo.md Tables 2 and 4"),
    Experiment(
        "qqp-tree-all", "Tree-search BERT against compute-all on every question of a positive pair (17,269 queries)",
        dataset="qqp-bimpm", split="all",
        systems=("minilm@mean", "tree-bert[K=5,beam=20]", "tree-bert[K=8,beam=20]", "tree-bert[K=10,beam=20]"),
        measures=("map@20", "precision@1", "mrr@20", "ndcg@20", "mrr@10"), k=20,
        paper="tree-search-bert-guo.md Table 2 (all positive-pair questions as queries)"),
)
_BY_NAME = {e.name: e for e in EXPERIMENTS}


def get_experiment(name: str) -> Experiment:
    """The declared experiment ``name`` (``UnknownNameError`` listing the known ones)."""
    if name not in _BY_NAME:
        raise UnknownNameError("experiment", name, list(_BY_NAME))
    return _BY_NAME[name]
