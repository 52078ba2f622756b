"""The one text pipeline: every word-level component tokenizes through here.

Vocabularies and GloVe look-ups (glove-mean, dual-encoder, DenseTrans, SDML-CNN, the CNN reranker),
the CNN reranker's overlap features, FRM's keywords, BM25 and the Jaccard/length buckets of Error
Analysis call :func:`tokens` or :func:`terms`, and the MiniLM family (minilm, tree-bert, minilm-pairs,
the cross-encoder) reads :func:`subword_text`, at training, index building, import and query time, so a
question typed as people write it ("How can I stop my depression?") gives the same tokens as the
bundled CoreNLP-tokenized form ("How can I stop my depression ?").

The tokenizer is NLTK's Penn-Treebank word tokenizer (``nltk.tokenize.NLTKWordTokenizer``: regular
expressions only, no data download), run on each sentence (split after ``.``, ``!``, ``?`` followed by
white space, since the Treebank rules split only a text's final period). PTB conventions: punctuation
split off, clitics ``n't``, ``'s``, ``'re``…; CoreNLP's bracket escapes (``-LRB-``) and the three quote
forms (``` `` ```, ``''``, ``"``) are mapped to one form each. Chosen by measurement on the 36,737 QQP
questions (bench/reports/text_pipeline.json, ``python -m bench.text_pipeline``): on the display form
people type it gives the CoreNLP tokens, and raw and tokenized input agree, for more questions than the same
tokenizer on the whole text (no sentence split), spaCy's tokenizer, sacremoses or whitespace splitting (the
figures and the speed: that report, BENCHMARKS.md "The text pipeline"); results are cached per text.

:data:`PIPELINE_VERSION` is stamped into every artifact built on these tokens; an artifact built with
another version is refused with one line naming the rebuild command (:func:`check_stamp`).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import nltk
from nltk.tokenize import NLTKWordTokenizer

from core.errors import MissingArtifactError

PIPELINE_VERSION = f"ptb-sentences-v1/nltk-{nltk.__version__}"
STAMP_KEY = "text_pipeline"

_TOKENIZER = NLTKWordTokenizer()
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORDLIKE = re.compile(r"\w", re.UNICODE)
_DIGIT = re.compile(r"\d")
CANONICAL = {"``": '"', "''": '"', "-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]",
              "-lcb-": "{", "-rcb-": "}"}


@lru_cache(maxsize=200_000)
def _cased(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text.strip()):
        for tok in _TOKENIZER.tokenize(sentence):
            out.append(CANONICAL.get(tok.lower(), tok))
    return tuple(out)


def tokens(text: str, lower: bool = True) -> list[str]:
    """PTB tokens of a text, raw or CoreNLP-tokenized alike; lower-cased unless ``lower=False``."""
    toks = _cased(text)
    return [t.lower() for t in toks] if lower else list(toks)


def terms(text: str, lower: bool = True) -> list[str]:
    """Lexical terms: the tokens that contain a letter or digit (punctuation tokens dropped).

    The analyzer of BM25, FRM's keyword candidates and the Jaccard similarity of Error Analysis.
    """
    return [t for t in tokens(text, lower) if _WORDLIKE.search(t)]


def subword_text(text: str) -> str:
    """The text a subword model (MiniLM's WordPiece) reads: the pipeline's cased tokens in display form.

    WordPiece splits punctuation itself but not PTB clitics ("do n't" vs "don't" give other pieces), so
    raw and CoreNLP-tokenized input are first brought to the same tokens, then detokenized the way
    people write ("How do n't I ?" and "How don't I?" both read "How don't I?").
    """
    from core.data.text import display_form

    return display_form(" ".join(_cased(text)))


def digits_to_zero(words: list[str]) -> list[str]:
    """Every digit replaced by 0 (the CNN reranker's preprocessing, cnn-rerank-severyn2015.md §5.1)."""
    return [_DIGIT.sub("0", w) for w in words]


def stamp() -> dict[str, str]:
    """The key/value every artifact built on these tokens stores in its config."""
    return {STAMP_KEY: PIPELINE_VERSION}


def stamped(config) -> dict:
    """A config (dataclass or dict) as a dict with this pipeline's stamp added, ready to save."""
    import dataclasses

    data = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    return {**data, **stamp()}


def stamped_version(config: dict | None) -> str | None:
    return (config or {}).get(STAMP_KEY)


def check_stamp(config: dict | None, what: str, command: str) -> None:
    """Refuse an artifact built with another text pipeline: one line naming both versions and the rebuild."""
    found = stamped_version(config)
    if found != PIPELINE_VERSION:
        raise MissingArtifactError(what, command, f"stale (built with text pipeline {found or 'unversioned (whitespace)'}; "
                                                  f"this code tokenizes with {PIPELINE_VERSION})")


def is_current(config_path: Path) -> bool:
    """Whether the config at ``config_path`` exists and carries this pipeline's stamp (for ``is_built``)."""
    import json

    try:
        return stamped_version(json.loads(Path(config_path).read_text(encoding="utf-8"))) == PIPELINE_VERSION
    except (OSError, ValueError, AttributeError):
        return False
