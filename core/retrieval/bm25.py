"""BM25 first-stage retrieval served by ``bm25s`` (sparse precomputed scores, numba top-k).

Variant: Lucene/Anserini BM25 (the engine densetrans-cai2021.md §4.2.3 used), idf = log(1 + (N - n + 0.5)
/ (n + 0.5)); bm25s omits the constant (k1 + 1) factor of the tf part, which does not change rankings.
Defaults k1 = 3.44, b = 0.87 as tuned for Quora in densetrans-cai2021.md §4.2.3. Analyzer: lower-cased
terms of the one text pipeline (``core.data.pipeline.terms``: PTB tokens with a letter or digit), no
stemming, no stop-word removal; the pipeline's version is stamped into the index's config.
``rank-bm25`` is the reference oracle in the tests (same variant, same rankings).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import bm25s
import numpy as np

from core.artifacts import config_from_dict, load_json, save_json
from core.data.datasets import Dataset
from core.data.keywords import LexicalStats
from core.errors import MissingArtifactError, QueryError
from core.registry import build_command, system_dir
from core.retrieval.base import Hits, ProgressFn, Reranker, Retriever, no_progress, order_ties, tie_depth
from core.data.pipeline import check_stamp, is_current, stamped, terms
from core.systems import registration_for

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

PRESETS = {"quora": (3.44, 0.87), "anserini-default": (0.9, 0.4), "classic": (1.2, 0.75)}
MMAP_FROM = 200_000  # documents from which a saved index is read memory-mapped (bm25s ``load(mmap=True)``)


@dataclass(frozen=True)
class BM25Config:
    """BM25 settings; paper default k1/b from densetrans-cai2021.md §4.2.3."""

    k1: float = 3.44
    b: float = 0.87
    method: str = "lucene"


def tokenize(texts: list[str]) -> list[list[str]]:
    return [terms(t) for t in texts]


class BM25Retriever(Retriever):
    """BM25 over a collection; ``retrieve`` scores all queries of a batch with bm25s."""

    def __init__(self, model: bm25s.BM25, doc_ids: list[str], config: BM25Config, name: str = "bm25",
                 avgdl: float | None = None) -> None:
        self.model, self.doc_ids, self.config, self.name = model, np.asarray(doc_ids), config, name
        self.batch_size = 2048
        self.avgdl = avgdl  # mean collection length in terms (saved at build; older builds: counted on first use)
        self._stats: LexicalStats | None = None

    @classmethod
    def index(cls, corpus: dict[str, str], config: BM25Config = BM25Config(), name: str = "bm25") -> BM25Retriever:
        ids = list(corpus)
        model = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        tokenized = tokenize([corpus[i] for i in ids])
        model.index(tokenized, show_progress=False)
        return cls(model, ids, config, name, avgdl=float(np.mean([len(t) for t in tokenized])) if ids else 1.0)

    # ------------------------------------------------------------------------- any (query, text) pair
    def lexical_stats(self, corpus: Mapping[str, str] | None = None) -> LexicalStats:
        """The index's own statistics as ``LexicalStats``: document frequencies and N read from the bm25s matrix,
        the mean length saved at build (an index saved without it counts it once over ``corpus``)."""
        if self._stats is None:
            if self.avgdl is None:
                if corpus is None:
                    raise QueryError(f"{self.name}: this index was saved without its mean document length; "
                                     "rebuild it (python -m core build --systems bm25 --force)")
                self.avgdl = float(np.mean([len(terms(t)) for t in corpus.values()])) if corpus else 1.0
            counts = np.diff(np.asarray(self.model.scores["indptr"]))
            df = {token: int(counts[i]) for token, i in self.model.vocab_dict.items() if token}
            self._stats = LexicalStats(df, int(self.model.scores["num_docs"]), float(self.avgdl),
                                       self.config.k1, self.config.b)
        return self._stats

    def term_contributions(self, query: str, text: str,
                           corpus: Mapping[str, str] | None = None) -> tuple[list[float], list[float]]:
        """Exact BM25 contribution of each query term and each text term (``terms`` order, repeats included).

        BM25(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d)(…)/(tf(t, d) + k1(1 − b + b·|d|/avgdl)) is a sum over the query's
        terms (a repeated query term counts each time, as bm25s scores it): a query term gets its summand; a text
        term gets the summands of the query terms equal to it, shared equally by its occurrences. Each side sums
        to the score."""
        stats = self.lexical_stats(corpus)
        q_terms, d_terms = terms(query), terms(text)
        if not q_terms or not d_terms:
            return [0.0] * len(q_terms), [0.0] * len(d_terms)
        counts = Counter(d_terms)
        unique = list(dict.fromkeys(q_terms))
        weights = stats.bm25_weights(text, unique, counts=(np.asarray([counts.get(t, 0) for t in unique],
                                                                     dtype=np.float32), len(d_terms)))
        per_term = {t: float(w) for t, w in zip(unique, weights)}
        q_count = Counter(q_terms)
        q_side = [per_term[t] for t in q_terms]
        d_side = [per_term.get(t, 0.0) * q_count.get(t, 0) / counts[t] for t in d_terms]
        return q_side, d_side

    def score_text_pairs(self, queries: list[str], texts: list[str],
                         corpus: Mapping[str, str] | None = None) -> np.ndarray:
        """BM25 of each (query, text) pair with this index's statistics, for texts inside the collection or not
        (equal to ``retrieve``'s scores on collection texts up to float32 rounding)."""
        return np.asarray([sum(self.term_contributions(q, d, corpus)[0]) for q, d in zip(queries, texts)],
                          dtype=np.float64)

    def retrieve(self, texts: list[str], k: int) -> Hits:
        k = min(k, len(self.doc_ids))
        tokens = tokenize(texts)
        n_threads = 0 if len(texts) < 64 else 2
        backend = "numba" if len(texts) >= 64 else "numpy"
        # bm25s refuses queries made only of unseen words with its vocab check; score them as zeros.
        known = [[t for t in q if t in self.model.vocab_dict] for q in tokens]
        nonempty = [i for i, q in enumerate(known) if q]
        ids: list[list[str]] = [[] for _ in texts]
        scores: list[list[float]] = [[] for _ in texts]
        if nonempty:
            # fetch past rank k so that the tie at rank k is ordered by collection position (order_ties):
            # the same top-k as any other exact engine (Milvus), not bm25s's own tie order
            docs, vals = self.model.retrieve(
                [known[i] for i in nonempty], k=min(tie_depth(k), len(self.doc_ids)), show_progress=False,
                n_threads=n_threads, backend_selection=backend,
            )
            for row, i in enumerate(nonempty):
                keep = vals[row] > 0  # documents sharing no term are not retrieved
                positions, values = docs[row][keep], vals[row][keep].astype(float)
                best = order_ties(positions, values, k)
                ids[i] = self.doc_ids[positions[best]].tolist()
                scores[i] = values[best].tolist()
        return Hits(ids, scores)

    def score_texts(self, query: str, doc_ids: list[str]) -> np.ndarray:
        """BM25 score of ``query`` against given collection items (used as a reranker feature)."""
        all_scores = self.model.get_scores([t for t in terms(query) if t in self.model.vocab_dict])
        position = {d: i for i, d in enumerate(self.doc_ids.tolist())}
        return np.asarray([all_scores[position[d]] for d in doc_ids], dtype=np.float32)


def _folder(dataset: Dataset, variant: str | None = None):
    return system_dir(dataset.name, "bm25", variant)


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, config: BM25Config | None = None) -> dict:
    """Index the collection and save it with its config (seconds, not minutes)."""
    config = config or (BM25Config(*PRESETS[variant]) if variant in PRESETS else BM25Config())
    progress(0.0, f"BM25: indexing {len(dataset.corpus):,} texts")
    start = time.perf_counter()
    retriever = BM25Retriever.index(dataset.corpus, config)
    folder = _folder(dataset, variant)
    retriever.model.save(str(folder / "index"))
    save_json(folder / "doc_ids.json", retriever.doc_ids.tolist())
    save_json(folder / "config.json", stamped(config))
    seconds = time.perf_counter() - start
    save_json(folder / "metrics.json", {"index_seconds": seconds, "documents": len(dataset.corpus),
                                        "avgdl": retriever.avgdl})
    progress(1.0, f"BM25: indexed in {seconds:.1f}s")
    return {"index_seconds": seconds}


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    return is_current(_folder(dataset, variant) / "config.json")


def load(dataset: Dataset, variant: str | None = None, mmap: bool | None = None, **options) -> BM25Retriever:
    """Load the saved index; ``k1``/``b`` options re-index in memory (a second or two on 36.7k). ``mmap``: read the
    index's arrays memory-mapped (bm25s ``load(mmap=True)``: pages read as queries touch them, shared between
    processes); by default from ``MMAP_FROM`` documents, a large archive's index then costs no resident copy."""
    if "k1" in options or "b" in options:
        base = BM25Config()
        cfg = BM25Config(float(options.get("k1", base.k1)), float(options.get("b", base.b)))
        return BM25Retriever.index(dataset.corpus, cfg, name=f"bm25(k1={cfg.k1},b={cfg.b})")
    folder = _folder(dataset, variant)
    command = build_command("bm25", dataset.name)
    raw = load_json(folder / "config.json", "the BM25 index", command)
    check_stamp(raw, "the BM25 index", command)
    config = config_from_dict(BM25Config, raw)
    doc_ids = load_json(folder / "doc_ids.json", "the BM25 index", command)
    mmap = len(dataset.corpus) >= MMAP_FROM if mmap is None else mmap
    try:
        model = bm25s.BM25.load(str(folder / "index"), mmap=mmap)
    except Exception as exc:
        raise MissingArtifactError("the BM25 index", command, f"corrupt ({type(exc).__name__})") from None
    if len(doc_ids) != len(dataset.corpus):
        raise MissingArtifactError("the BM25 index", command + " --force", "stale (collection changed)")
    try:
        avgdl = (load_json(folder / "metrics.json", "the BM25 index", command) or {}).get("avgdl")
    except MissingArtifactError:
        avgdl = None
    return BM25Retriever(model, doc_ids, config, avgdl=None if avgdl is None else float(avgdl))


class BM25PairScorer(Reranker):
    """BM25 as a pair scorer over a fixed set of candidate texts (one index over all of them)."""

    def __init__(self, corpus: Mapping[str, str], name: str = "bm25", config: BM25Config | None = None) -> None:
        self.name = name
        self.retriever = BM25Retriever.index(dict(corpus), config or BM25Config(), name=name)
        self._row_of_text: dict[str, int] = {}
        for i, text in enumerate(corpus.values()):
            self._row_of_text.setdefault(text, i)
        self._query_cache: dict[str, np.ndarray] = {}

    def _scores(self, query: str) -> np.ndarray:
        if query not in self._query_cache:
            model = self.retriever.model
            known = [t for t in terms(query) if t in model.vocab_dict]
            self._query_cache[query] = (np.asarray(model.get_scores(known), dtype=np.float64) if known
                                        else np.zeros(len(self.retriever.doc_ids)))
        return self._query_cache[query]

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        """Candidate texts from the index's scores; any other text (an occlusion's variant) by the same BM25 with
        the candidate texts' statistics (``BM25Retriever.score_text_pairs``)."""
        out = np.zeros(len(queries), dtype=np.float64)
        for i, (q, d) in enumerate(zip(queries, docs)):
            row = self._row_of_text.get(d)
            out[i] = self._scores(q)[row] if row is not None else self.retriever.score_text_pairs([q], [d])[0]
        return out

    def term_contributions(self, query: str, text: str, corpus: Mapping[str, str] | None = None):
        """The exact per-term contributions (``BM25Retriever.term_contributions``) over the candidate texts."""
        return self.retriever.term_contributions(query, text, corpus)


def candidate_scorer(corpus: dict[str, str], variant: str | None = None) -> BM25PairScorer:
    """BM25 over a candidate-list dataset: one index over every candidate text (built in memory, seconds), with
    the variant's k1/b (``PRESETS``; the paper's default otherwise)."""
    if variant is not None and variant not in PRESETS:
        from core.errors import UnknownNameError

        raise UnknownNameError("variant of bm25", variant, sorted(PRESETS))
    config = BM25Config(*PRESETS[variant]) if variant else BM25Config()
    return BM25PairScorer(corpus, name="bm25" + (f"@{variant}" if variant else ""), config=config)


def config_dict(variant: str | None = None) -> dict:
    return {**BM25Config().__dict__, "presets": PRESETS, "paper default": "k1=3.44, b=0.87"}
