"""Fusion of first stages (core.retrieval.fusion): names, ranx fusion against the formulas, build/tune/load on the tiny fixture."""
from __future__ import annotations

import pytest

from core.errors import MissingArtifactError, StudioError, UnknownNameError
from core.retrieval.fusion import fuse_dicts, parse_variant


def test_parse_variant_accepts_parts_with_variants_and_rejects_bad_names():
    spec = parse_variant("bm25[classic]+minilm[finetuned]+densetrans[+Concat]:wsum")
    assert spec.parts == (("bm25", "classic"), ("minilm", "finetuned"), ("densetrans", "+Concat"))
    assert spec.method == "wsum" and spec.variant == "bm25[classic]+minilm[finetuned]+densetrans[+Concat]:wsum"
    assert parse_variant(None).variant == "bm25+minilm:rrf"
    for bad in ("bm25:rrf", "bm25+bm25:rrf", "bm25+minilm", "bm25+minilm:max", "bm25+fusion:rrf", "bm25+:rrf",
                "bm25+minilm[nope]:rrf", "bm25 minilm:rrf"):
        with pytest.raises(StudioError):
            parse_variant(bad)
    with pytest.raises(UnknownNameError):
        parse_variant("bm25+nope:rrf")
    assert parse_variant("bm25+frm:rrf").parts == (("bm25", None), ("frm", None))  # a reranker: candidate lists


def test_registry_accepts_fusion_names_by_pattern():
    from core.registry import check_variant

    check_variant("fusion", "bm25+sdml-cnn[tl-euc]:combsum")
    with pytest.raises(UnknownNameError):
        check_variant("fusion", "bm25")
    with pytest.raises(UnknownNameError):
        check_variant("bm25", "bm25+minilm:rrf")


A = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 5.0, "y": 1.0}}
B = {"q1": {"c": 0.9, "a": 0.5, "d": 0.1}, "q2": {}}


def test_rrf_matches_cormack_formula():
    out = dict(fuse_dicts([A, B], "rrf", {"k": 10}))
    q1 = dict(out["q1"])
    assert q1["a"] == pytest.approx(1 / 11 + 1 / 12)
    assert q1["c"] == pytest.approx(1 / 13 + 1 / 11)
    assert q1["b"] == pytest.approx(1 / 12)
    assert q1["d"] == pytest.approx(1 / 13)
    assert [d for d, _ in out["q1"]] == ["a", "c", "b", "d"]  # sorted best first
    # q2: B is empty, so only A is fused (the order of A survives)
    assert [d for d, _ in out["q2"]] == ["x", "y"]


def test_combsum_and_wsum_use_min_max_normalised_scores():
    comb = dict(dict(fuse_dicts([A, B], "combsum"))["q1"])
    # A: a=1, b=.5, c=0 ; B: c=1, a=.5, d=0
    assert comb["a"] == pytest.approx(1.5) and comb["c"] == pytest.approx(1.0) and comb["b"] == pytest.approx(0.5)
    ws = dict(dict(fuse_dicts([A, B], "wsum", {"weights": [0.2, 0.8]}))["q1"])
    assert ws["a"] == pytest.approx(0.2 * 1 + 0.8 * 0.5)
    assert ws["c"] == pytest.approx(0.8)
    assert ws["b"] == pytest.approx(0.1)
    top1 = fuse_dicts([A, B], "wsum", {"weights": [0.2, 0.8]}, k=1)
    assert [d for d, _ in top1["q1"]] == ["c"]
    with pytest.raises(StudioError):
        fuse_dicts([A, B], "borda")


@pytest.fixture
def tiny_bm25(tiny_data, fresh_var):
    from core.data.datasets import load_dataset
    from core.retrieval import bm25

    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    bm25.build(ds, variant="classic")
    return ds


def test_build_tunes_on_dev_and_fused_search_drops_the_query(tiny_bm25):
    from core.retrieval import fusion
    from core.serving.loader import load as load_system, part_loader

    ds = tiny_bm25
    variant = "bm25+bm25[classic]:wsum"
    assert not fusion.is_built(ds, variant)
    with pytest.raises(MissingArtifactError, match="python -m core train --system fusion"):
        fusion.load(ds, variant, loader=part_loader(ds))
    metrics = fusion.build(ds, variant=variant, loader=part_loader(ds))
    assert metrics["dev_queries"] == len(ds.split_qrels("dev")) > 0
    assert len(metrics["params"]["weights"]) == 2 and metrics["tuned_on"].startswith("dev")
    assert fusion.is_built(ds, variant) and variant in fusion.built_variants(ds)
    retriever = load_system("fusion", ds, variant=variant)
    assert retriever.name == f"fusion@{variant}"
    qids = list(ds.split_queries("test"))[:4]
    many = retriever.search_many({q: ds.queries[q] for q in qids}, k=5, ignore_identical_ids=True)
    for q in qids:
        one = retriever.search(ds.queries[q], 5, exclude=[q])
        assert q not in one.doc_ids and q not in many[q].doc_ids
        assert one.doc_ids == many[q].doc_ids
        assert one.scores == sorted(one.scores, reverse=True)
        assert {"bm25_seconds", "bm25[classic]_seconds", "fuse_seconds"} <= set(one.stats)


def test_fusion_of_a_missing_part_names_the_part_command(tiny_data, fresh_var):
    from core.retrieval import fusion
    from core.data.datasets import load_dataset
    from core.retrieval import bm25
    from core.serving.loader import part_loader

    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    with pytest.raises(MissingArtifactError, match="--system densetrans"):
        fusion.build(ds, variant="bm25+densetrans:combsum", loader=part_loader(ds))
    assert not fusion.is_built(ds, "bm25+densetrans:combsum")
    # a cheap part (a BM25 preset: seconds) is built on demand by the one loader, as everywhere else
    fusion.build(ds, variant="bm25+bm25[classic]:combsum", loader=part_loader(ds))
    assert fusion.is_built(ds, "bm25+bm25[classic]:combsum")
