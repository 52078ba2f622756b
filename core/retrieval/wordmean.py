"""``glove-mean``: the untrained reference of the learned first-stage encoders.

A question is the mean of the GloVe 6B 50-d vectors of its words (words GloVe does not know are left
out of the mean), ranked by cosine: no training. DenseTrans and the ``dual-encoder`` start from these
vectors and must beat this system; their metrics name it as ``training.reference``.

Artifacts (``registry.system_dir(dataset, "glove-mean")``): ``config.json``, ``vocab.json``,
``model.pt`` (the frozen word matrix), ``embeddings.npy``, ``metrics.json`` (dev and test numbers).
Also the serving helpers shared with ``core.retrieval.dual_encoder`` (``serve``, ``test_scores``).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from core.artifacts import load_torch, save_json, save_torch
from core.data.datasets import Dataset
from core.errors import MissingArtifactError
from core.retrieval.indexing import IndexSpec
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
from core.data.pipeline import PIPELINE_VERSION
from core.data.tokenizers import IdsEncoder, WordVocab, load_vocab, state_fingerprint, vocab_is_current
from core.systems import registration_for
from core.training import check_profile, device, preserved_rng

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

SYSTEM = "glove-mean"
DEFAULT_INDEX = "auto"  # exact below 1M vectors (core/retrieval/indexing.py)
MAX_WORDS = 30  # as DenseTrans (§4.2.3): questions truncated to 30 words
TEST_METRICS = ("recall@100", "hit_rate@1", "mrr@100")
DEV_DISTRACTORS = 5000  # the dev collection of the quick DenseTrans / dual-encoder runs


def collection_vocab(dataset: Dataset, glove_only: bool) -> WordVocab:
    """Every word of the collection (most frequent first); ``glove_only`` keeps the GloVe words."""
    vocab = WordVocab.build(dataset.corpus.values(), max_size=10**7, hash_bins=0)
    if not glove_only:
        return vocab
    from core.data.vectors import load_glove_50d

    known = load_glove_50d().index
    return WordVocab(tuple(w for w in vocab.words if w.lower() in known), 0)


def glove_matrix(vocab: WordVocab, seed: int = 13, oov_scale: float = 0.2) -> torch.Tensor:
    """Rows for [PAD], [CLS], [UNK] and the words: GloVe where known, U(−oov_scale, oov_scale) else."""
    from core.data.vectors import load_glove_50d

    rng = np.random.default_rng(seed)
    matrix, _found = load_glove_50d().lookup(["[PAD]", "[CLS]", "[UNK]", *vocab.words], rng, scale=oov_scale)
    matrix[:3] = 0.0
    return torch.from_numpy(matrix)


def test_scores(retriever: DenseRetriever, dataset: Dataset, split: str = "test") -> dict[str, float]:
    """``split`` queries against the whole collection through ``retriever`` (each query dropped from
    its own ranking), ranx scores of ``TEST_METRICS``."""
    from core.evaluation import evaluate_run

    queries = dataset.split_queries(split)
    rankings = retriever.search_many(queries, k=100, ignore_identical_ids=True)
    return evaluate_run(dataset.split_qrels(split), rankings, list(TEST_METRICS))


def serve(name: str, folder, encoder: IdsEncoder, dataset: Dataset, what: str, command: str,
          index: str = DEFAULT_INDEX, fresh: bool = False, progress: ProgressFn = no_progress,
          search_params: str | None = None, retriever_cls=DenseRetriever):
    """Collection vectors (stored beside the checkpoint) + the requested faiss index -> retriever."""
    vectors, faiss_index, spec, encode_seconds = stored_vectors_and_index(
        folder, encoder, dataset.corpus, lambda n, d: IndexSpec.from_preset(index, n, d), index, what, command,
        fresh=fresh, progress=progress, batch_size=512)
    retriever = retriever_cls(name, encoder, list(dataset.corpus), faiss_index, spec, vectors,
                              list(dataset.corpus.values()))
    if search_params:
        retriever.set_params(search_params)
    return retriever, encode_seconds


def _model(vocab_size: int, pretrained=None):
    from models.dual_encoder import DualEncoder

    return DualEncoder(vocab_size, emb_dim=50, pad_id=0, pretrained=pretrained, linear=False, ignore_ids=(1, 2))


def _encoder(dataset: Dataset):
    """(vocab, encoder) of the untrained GloVe mean; built from the collection, seconds."""
    vocab = collection_vocab(dataset, glove_only=True)
    model = _model(vocab.size, glove_matrix(vocab)).eval()
    state = model.state_dict()
    return vocab, model, IdsEncoder(model, vocab, MAX_WORDS, add_cls=False, encoder_id=f"glove-mean:{state_fingerprint(state)}")


def reference(dataset: Dataset, dev_distractors: int = DEV_DISTRACTORS, seed: int = 13) -> dict:
    """``TrainLog.reference`` for a learned encoder: glove-mean's dev Recall@100 on the same dev
    collection the learner early-stops on, and its test Recall@100 (exact, whole collection)."""
    import json

    from core.paths import artifact_dir
    from core.registry import slug
    from core.retrieval.contrastive import dev_collection, split_score
    from core.retrieval.dense import corpus_fingerprint

    cache = artifact_dir("cache", "reference") / (
        f"{slug(dataset.name)}-{corpus_fingerprint(dataset.corpus)}-{dev_distractors}-{seed}-{slug(PIPELINE_VERSION)}.json")
    if cache.is_file():
        try:
            return json.loads(cache.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass  # recompute
    with preserved_rng():  # called between a trainer's set_seed and its first step: a cold cache must not matter
        _vocab, _model_, encoder = _encoder(dataset)
        dev = split_score(encoder, dataset, dev_collection(dataset, dev_distractors, seed))["recall@100"]
        test = None
        if dataset.query_splits.get("test"):
            from core.retrieval.dense import l2_normalize

            vectors = l2_normalize(encoder.encode(list(dataset.corpus.values())))
            retriever = DenseRetriever.from_vectors(SYSTEM, encoder, dataset.corpus, vectors, IndexSpec("Flat"))
            test = test_scores(retriever, dataset)["recall@100"]
    out = {"system": SYSTEM, "variant": None, "metric": "recall@100", "dev": dev, "test": test,
           "dev_distractors": dev_distractors}
    save_json(cache, out)
    return out


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None) -> dict:
    """Vocabulary + frozen GloVe matrix, collection vectors, exact index; dev and test numbers."""
    check_profile(profile)
    REGISTRATION.check_variant(variant)
    start = time.perf_counter()
    folder = system_dir(dataset.name, SYSTEM)
    vocab, model, encoder = _encoder(dataset)
    save_json(folder / "config.json", {"embeddings": "glove-6B-50d", "max_words": MAX_WORDS, "oov": "left out of the mean"})
    save_json(folder / "vocab.json", vocab.to_dict())
    save_torch(folder / "model.pt", model.state_dict())
    progress(0.2, "encoding the collection")
    retriever, encode_seconds = serve(SYSTEM, folder, encoder, dataset, "the glove-mean vectors",
                                      build_command(SYSTEM, dataset.name), fresh=True,
                                      progress=lambda f, m: progress(0.2 + 0.6 * f, m))
    metrics = {"profile": profile, "trained": False, "vocabulary": len(vocab.words),
               "encode_seconds": encode_seconds, "index": retriever.spec.factory, "dim": int(retriever.index.d)}
    if dataset.query_splits.get("test"):
        metrics["test"] = test_scores(retriever, dataset)
    if dataset.query_splits.get("dev"):
        from core.retrieval.contrastive import dev_collection, split_score

        metrics["dev"] = split_score(encoder, dataset, dev_collection(dataset, DEV_DISTRACTORS))
        metrics["dev_distractors"] = DEV_DISTRACTORS
    metrics["total_seconds"] = time.perf_counter() - start
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"glove-mean ready ({len(dataset.corpus):,} vectors)")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = system_dir(dataset.name, SYSTEM)
    return vocab_is_current(folder) and all((folder / f).is_file() for f in ("model.pt", "embeddings.npy"))


def load(dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX,
         search_params: str | None = None, **options) -> DenseRetriever:
    """The GloVe-mean retriever over the collection (``index``: ``auto`` (exact here), ``flat``,
    ``ivfpq``, ``ivf``, ``hnsw`` or a factory string)."""
    REGISTRATION.check_variant(variant)
    folder = system_dir(dataset.name, SYSTEM)
    command = build_command(SYSTEM, dataset.name)
    vocab = load_vocab(folder / "vocab.json", "the glove-mean vocabulary", command)
    state = load_torch(folder / "model.pt", "the glove-mean word vectors", command)
    try:
        model = _model(state["token.weight"].shape[0])
        model.load_state_dict(state)
    except (KeyError, RuntimeError, TypeError, ValueError) as exc:
        raise MissingArtifactError("the glove-mean word vectors", command, f"corrupt ({type(exc).__name__})") from None
    model.to(device()).eval()
    encoder = IdsEncoder(model, vocab, MAX_WORDS, add_cls=False, encoder_id=f"glove-mean:{state_fingerprint(state)}")
    return serve(SYSTEM, folder, encoder, dataset, "the glove-mean vectors", command, index=index,
                 search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    return {"paper": {"embeddings": "GloVe 6B 50-d (frozen)", "pooling": "mean over known words",
                      "relevance": "cosine", "max_words": MAX_WORDS},
            "notes": "untrained reference of DenseTrans and dual-encoder; words = lower-cased "
                     "whitespace tokens; words GloVe lacks are left out of the mean"}
