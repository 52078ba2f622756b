"""Milvus backend: parity with faiss Flat and bm25s, self-match removal, RRF hybrid, atomic
alias switch, unreachable servers, and the streamed, resumable BEIR import.

A ``milvus-lite server`` on 127.0.0.1 is started once per session (``tests/milvus_server.py``); without
it these tests are skipped with the reason, or fail under ``CI``.
"""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from tests.conftest import TINY_DATA
from tests.milvus_server import milvus_uri  # noqa: F401  (session fixture)

K = 10


@pytest.fixture(scope="module")
def tiny_systems():
    """The tiny QQP fixture with BM25 and glove-mean built (seconds), loaded as faiss/bm25s retrievers."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(TINY_DATA))
        from core.data.datasets import load_dataset
        from core.retrieval import bm25, wordmean

        dataset = load_dataset("qqp-bimpm")
        bm25.build(dataset)
        wordmean.build(dataset)
        yield dataset, bm25.load(dataset), wordmean.load(dataset, index="flat")


def same_up_to_ties(ref, got, tol: float = 1e-5) -> bool:
    """Same scores position by position, and the same ids wherever the score is not tied with the
    k-th (faiss/bm25s and Milvus may order equal scores differently)."""
    if len(ref.doc_ids) != len(got.doc_ids):
        return False
    if not np.allclose(got.scores, ref.scores, rtol=tol, atol=tol):
        return False
    if not ref.scores:
        return True
    kth = ref.scores[-1]
    above = lambda r: {d for d, s in zip(r.doc_ids, r.scores) if s > kth + tol}  # noqa: E731
    groups_ok = all(
        {d for d, t in zip(ref.doc_ids, ref.scores) if abs(t - s) <= tol} == {d for d, t in zip(got.doc_ids, got.scores) if abs(t - s) <= tol}
        for s in ref.scores if s > kth + tol)
    return above(ref) == above(got) and groups_ok


def _parity(ref, served, queries):
    a = ref.search_many(queries, k=K, ignore_identical_ids=True)
    b = served.search_many(queries, k=K, ignore_identical_ids=True)
    identical = sum(a[q].doc_ids == b[q].doc_ids for q in queries)
    bad = [q for q in queries if not same_up_to_ties(a[q], b[q])]
    return identical, bad


def test_dense_flat_parity_with_faiss(tiny_systems, milvus_uri):
    from core.retrieval.milvus import milvus_retriever

    dataset, _bm25, glove = tiny_systems
    served = milvus_retriever(glove, dataset.name, uri=milvus_uri, index="flat")
    assert served.name == "glove-mean:milvus-flat"
    identical, bad = _parity(glove, served, dataset.queries)
    assert bad == [], f"{len(bad)} queries differ beyond ties, e.g. {bad[:3]}"
    assert identical >= len(dataset.queries) - 3  # only exact-score ties may swap places
    # a query typed by a person (not a collection text) goes through the system's own encoder
    typed = "How do I learn  Python programming quickly?"
    assert same_up_to_ties(glove.search(typed, K), served.search(typed, K))
    info = served.describe()
    assert info["index"] == "Milvus FLAT (exact)" and info["collection"].startswith(info["alias"])


def test_dense_hnsw_serves_close_to_exact(tiny_systems, milvus_uri):
    from core.retrieval.milvus import milvus_retriever

    dataset, _bm25, glove = tiny_systems
    served = milvus_retriever(glove, dataset.name, uri=milvus_uri, index="hnsw")
    assert "HNSW (M=32, efConstruction=40" in served.describe()["index"]
    exact = glove.search_many(dataset.queries, k=K)
    approx = served.search_many(dataset.queries, k=K)
    overlap = np.mean([len(set(exact[q].doc_ids) & set(approx[q].doc_ids)) / K for q in dataset.queries])
    assert overlap >= 0.95


def test_bm25_parity_with_bm25s(tiny_systems, milvus_uri):
    from core.retrieval.milvus import milvus_retriever
    from core.retrieval.milvus_plan import bm25_query_vectors

    dataset, bm25, _glove = tiny_systems
    served = milvus_retriever(bm25, dataset.name, uri=milvus_uri)
    assert served.name == "bm25:milvus-flat"
    identical, bad = _parity(bm25, served, dataset.queries)
    assert bad == [], f"{len(bad)} queries differ beyond ties, e.g. {bad[:3]}"
    # ties at rank k are ordered by collection position on both sides (core.retrieval.base.order_ties)
    assert identical == len(dataset.queries)
    # repeated terms count again in bm25s's score; unknown words are ignored; no known word: no hits
    for text in ("what what is the best best way", "Why is SOCIAL media   so popular?! zzqqxx"):
        assert same_up_to_ties(bm25.search(text, K), served.search(text, K))
    assert bm25_query_vectors(bm25, ["best best way"])[0][bm25.model.vocab_dict["best"]] == 2.0
    assert served.search("zzqqxx qqzzyy", K).doc_ids == bm25.search("zzqqxx qqzzyy", K).doc_ids == []


def test_query_drops_itself(tiny_systems, milvus_uri):
    from core.retrieval.milvus import milvus_retriever

    dataset, _bm25, glove = tiny_systems
    served = milvus_retriever(glove, dataset.name, uri=milvus_uri)
    kept = served.search_many(dataset.queries, k=K, ignore_identical_ids=False)
    dropped = served.search_many(dataset.queries, k=K, ignore_identical_ids=True)
    for qid in dataset.queries:
        assert qid in kept[qid].doc_ids and kept[qid].scores[0] == pytest.approx(1.0, abs=1e-5)  # itself: cos 1
        assert qid not in dropped[qid].doc_ids and len(dropped[qid].doc_ids) == K
        assert dropped[qid].doc_ids[: K - 1] == [d for d in kept[qid].doc_ids if d != qid][: K - 1]


def test_hybrid_is_milvus_rrf_of_both(tiny_systems, milvus_uri):
    from core.retrieval.milvus import HYBRID_DEPTH, RRF_K, milvus_retriever

    dataset, bm25, glove = tiny_systems
    served = milvus_retriever([bm25, glove], dataset.name, uri=milvus_uri)
    assert served.name == "bm25+glove-mean:milvus-rrf"
    texts = list(dataset.queries.values())[:30]
    got = served.retrieve(texts, K)
    parts = [glove.retrieve(texts, HYBRID_DEPTH + 50), bm25.retrieve(texts, HYBRID_DEPTH + 50)]
    tie_free = exact = 0
    for i in range(len(texts)):
        # each part's RRF share 1/(k + rank), rank from 1, within the top HYBRID_DEPTH; tied scores may take
        # any rank of their tie group, so the share of a tied document lies between two bounds
        low: dict[str, float] = {}
        high: dict[str, float] = {}
        ties = False
        for hits in parts:
            scores = np.asarray(hits.scores[i])
            for rank, (d, s) in enumerate(zip(hits.ids[i], scores), start=1):
                group = np.flatnonzero(np.abs(scores - s) <= 1e-5 * max(1.0, abs(s))) + 1
                ties |= len(group) > 1 and group[0] <= HYBRID_DEPTH
                first, last = int(group[0]), int(group[-1])
                if first <= HYBRID_DEPTH:
                    high[d] = high.get(d, 0.0) + 1.0 / (RRF_K + first)
                    low[d] = low.get(d, 0.0) + (1.0 / (RRF_K + last) if last <= HYBRID_DEPTH else 0.0)
        for d, s in zip(got.ids[i], got.scores[i]):
            assert low[d] - 1e-6 <= s <= high[d] + 1e-6, (i, d, s, low[d], high[d])
            exact += abs(high[d] - low[d]) < 1e-9
        assert got.scores[i] == sorted(got.scores[i], reverse=True) and len(got.ids[i]) == K
        if not ties:  # no tie anywhere: exactly RRF of the two reference rankings
            tie_free += 1
            expected = sorted(high.items(), key=lambda t: -t[1])[:K]
            assert got.ids[i] == [d for d, _ in expected]
            assert np.allclose(got.scores[i], [v for _, v in expected], rtol=1e-5)
    assert exact >= len(texts) * K // 2  # most returned documents are untied: their RRF score is exact


def test_rebuild_switches_alias_while_searching(tiny_systems, milvus_uri):
    from pymilvus import MilvusClient

    from core.retrieval.milvus import milvus_retriever

    dataset, _bm25, glove = tiny_systems
    served = milvus_retriever(glove, dataset.name, uri=milvus_uri)
    before = served.describe()["collection"]
    texts = list(dataset.queries.values())
    reference = served.retrieve(texts, K)
    again = milvus_retriever(glove, dataset.name, uri=milvus_uri)  # same fingerprint: reused, nothing written
    assert again.describe()["collection"] == before
    results, errors, stop = [], [], threading.Event()

    def search_loop() -> None:
        while not stop.is_set():
            try:
                results.append(served.retrieve(texts, K))
            except Exception as exc:  # noqa: BLE001 - any failure is what the test looks for
                errors.append(exc)

    thread = threading.Thread(target=search_loop)
    thread.start()
    try:
        for _ in range(2):
            milvus_retriever(glove, dataset.name, uri=milvus_uri, rebuild=True)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors[:1]
    assert len(results) >= 2
    for hits in results:
        assert hits.ids == reference.ids  # complete and identical, before, during and after the switch
    after = served.describe()["collection"]
    assert after != before
    client = MilvusClient(uri=milvus_uri)
    mine = [c for c in client.list_collections() if c.startswith(served.alias + "_")]
    client.close()
    assert mine == [after]  # the old collection was dropped after the switch


def test_failed_build_is_never_served(tiny_systems, milvus_uri):
    from pymilvus import MilvusClient

    from core.retrieval.milvus_client import MilvusError, alias_name, index_spec, milvus_config
    from core.retrieval.milvus_collections import Layout, write_collection

    config = milvus_config(milvus_uri)
    alias = alias_name("broken", "tiny", "flat")
    rows = [{"pk": i, "doc_id": f"d{i}", "dense": [1.0, float(i)]} for i in range(10)]

    def batches(fail: bool):
        yield rows[:5]
        if fail:
            raise MilvusError("connection lost (simulated)")
        yield rows[5:]

    first = write_collection(config, alias, "0" * 12, Layout(2), index_spec("flat"), batches(False), 10)
    with pytest.raises(MilvusError):
        write_collection(config, alias, "1" * 12, Layout(2), index_spec("flat"), batches(True), 10)
    client = MilvusClient(uri=milvus_uri)
    mine = [c for c in client.list_collections() if c.startswith(alias + "_")]
    assert mine == [first] and client.describe_alias(alias)["collection_name"] == first
    client.close()


def test_unreachable_server_one_line_naming_uri(tiny_systems, monkeypatch):
    from core.retrieval.milvus import milvus_retriever
    from core.retrieval.milvus_client import MilvusError, milvus_config
    from core.retrieval.milvus_server import free_port

    dataset, _bm25, glove = tiny_systems
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("QRS_MILVUS_URI", uri)
    monkeypatch.setenv("QRS_MILVUS_TOKEN", "user:secret")
    assert milvus_config().uri == uri and milvus_config().token == "user:secret"
    start = time.perf_counter()
    with pytest.raises(MilvusError) as info:
        milvus_retriever(glove, dataset.name)
    assert time.perf_counter() - start < 8
    message = str(info.value)
    assert uri in message and "\n" not in message and "unreachable" in message and "secret" not in message
    monkeypatch.delenv("QRS_MILVUS_URI")
    with pytest.raises(Exception, match="QRS_MILVUS_URI"):
        milvus_config()


def test_silent_server_times_out(tiny_systems):
    """A port that accepts connections but never answers (a hung server) fails within the timeout."""
    import socket

    from core.retrieval.milvus_client import MilvusConfig, MilvusError, connect

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        uri = f"http://127.0.0.1:{listener.getsockname()[1]}"
        start = time.perf_counter()
        with pytest.raises(MilvusError, match=uri.replace(".", r"\.")):
            connect(MilvusConfig(uri, timeout=2.0))
        assert time.perf_counter() - start < 6


# ----------------------------------------------------------------------------- streamed BEIR import
class CountingEncoder:
    """A deterministic 16-d bag-of-hashed-words encoder that records each call's batch size."""

    encoder_id = "hash16-test"

    def __init__(self, fail_after_calls: int | None = None) -> None:
        self.calls: list[int] = []
        self.fail_after_calls = fail_after_calls

    def encode(self, texts, batch_size=128, progress=None):
        if self.fail_after_calls is not None and len(self.calls) >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated kill")
        self.calls.append(len(texts))
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int.from_bytes(word.encode()[:4].ljust(4, b"_"), "little") % 16] += 1.0
            out[i, len(text) % 16] += 0.5
        return out


def _beir_folder(path, n: int = 230):
    rng = np.random.default_rng(0)
    words = "how why what best way learn python money india phone sleep read write code music".split()
    path.mkdir()
    with open(path / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            text = " ".join(rng.choice(words, size=int(rng.integers(3, 9))))
            f.write(json.dumps({"_id": f"doc-{i}", "title": "Q" if i % 7 == 0 else "", "text": text}) + "\n")
            if i % 50 == 0:
                f.write("\n")  # blank lines are skipped
    return path


def test_streamed_import_resumes_after_kill(tmp_path, milvus_uri):
    from core.retrieval.streaming import StreamConfig, encode_beir_corpus, import_beir_to_milvus

    folder = _beir_folder(tmp_path / "beir")
    config = StreamConfig(chunk_size=40, encode_batch=16)
    # uninterrupted reference
    plain = encode_beir_corpus(folder, CountingEncoder(), tmp_path / "plain", config)
    assert plain.count == 230 and len(plain.chunks) == 6 and plain.encoded == 230
    # killed while encoding the 4th chunk: 3 whole chunks on disk, no partial file counted
    work = tmp_path / "resumed"
    killed = CountingEncoder(fail_after_calls=3)
    with pytest.raises(KeyboardInterrupt):
        encode_beir_corpus(folder, killed, work, config)
    assert sorted(p.name for p in work.glob("chunk-*.npz")) == [f"chunk-00000{i}.npz" for i in range(3)]
    (work / ".chunk-000003.tmp.npz").write_bytes(b"half a chunk")  # what a kill mid-write leaves
    encoder = CountingEncoder()
    fractions = []
    served = import_beir_to_milvus(folder, encoder, "beir-tiny", "hash16", uri=milvus_uri, work_dir=work,
                                   config=config, progress=lambda f, m: fractions.append(f))
    assert encoder.calls == [40, 40, 30]  # only the missing chunks, one chunk at a time
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    resumed = encode_beir_corpus(folder, CountingEncoder(fail_after_calls=0), work, config)  # nothing to encode
    assert resumed.reused == 230 and resumed.fingerprint == plain.fingerprint
    for a, b in zip(plain.chunks, resumed.chunks):
        with np.load(a) as x, np.load(b) as y:
            assert x["ids"].tolist() == y["ids"].tolist() and np.array_equal(x["vectors"], y["vectors"])
    # the served collection answers with BEIR ids, each query dropping itself
    rankings = served.search_many({"doc-5": "how to learn python", "doc-6": "best way money"}, k=5)
    assert all(len(r.doc_ids) == 5 and q not in r.doc_ids for q, r in rankings.items())
    hits = served.retrieve(["how to learn python"], 230)
    assert sorted(hits.ids[0]) == sorted(f"doc-{i}" for i in range(230))


def test_cli_search_on_milvus_ranks_like_the_faiss_default(tiny_data, fresh_var, milvus_uri, monkeypatch):
    """``QRS_MILVUS_URI=... python -m core search --system S --backend milvus`` ranks like faiss,
    through the one loader and runner; Compare labels a Milvus-served column apart from the faiss one."""
    from core.data.datasets import load_dataset
    from core.retrieval import bm25, wordmean
    from core.serving.runner import SystemChoice
    from tests.conftest import run_main

    monkeypatch.setenv("QRS_MILVUS_URI", milvus_uri)
    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    wordmean.build(ds)
    for name in ("glove-mean", "bm25"):
        outs = []
        for extra in ((), ("--backend", "milvus")):
            code, out, err = run_main("search", "--system", name, "-k", "10", *extra, "How can I stop my depression?")
            assert code == 0, err
            rows = [line.split() for line in out.splitlines()[2:] if line.split() and line.split()[0].isdigit()]
            outs.append([(r[1], round(float(r[2]), 3)) for r in rows])
        assert [s for _, s in outs[0]] == [s for _, s in outs[1]]  # same scores rank for rank (ties may swap)
        assert sum(a == b for a, b in zip(*outs)) >= 8
        assert "served by Milvus" in out and milvus_uri in out
    assert SystemChoice("glove-mean", options=(("backend", "milvus"),)).label == "glove-mean [milvus]"
    code, _out, err = run_main("search", "--system", "frm", "--backend", "milvus", "why?")
    assert code == 2 and len(err.strip().splitlines()) == 1
