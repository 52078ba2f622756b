"""A benchmark-sized archive: a BEIR folder of N questions made from the bundled collections' text, written as a
stream. It measures cost (time, memory, index bytes), not quality.

    python -m bench.large_archive --n 1000000 --out /tmp/archive-1m [--seed 0]

What it holds: rounds over the bundled texts. Round 0 is QQP's collection as bundled (every paraphrase cluster, in
the collection's order), then TrecQA's candidate sentences (each its own cluster); every later round emits every
cluster again in an order shuffled by ``--seed`` and the round, each text perturbed (one word dropped, two
neighbouring words swapped: ``perturb``), so the archive is not N copies of the same texts and its token lengths
stay those of real questions. A cluster is written whole and stays a cluster: every member of a cluster of two or
more is a query (``queries.jsonl``) whose relevant questions are the other members of the same copy
(``qrels/test.tsv``), as QQP's protocol (the query is in the collection: ``ignore_identical_ids``). The archive
stops at N documents (the last cluster may be cut; its qrels hold only the written members).

Memory holds the bundled texts and one cluster at a time, whatever N; the files are written under temporary names
and renamed at the end, so a killed run leaves no half folder. ``metadata.json`` and ``README.md`` in the folder say
what it is and that its numbers are cost, not quality. A folder that exists is refused (exit code 2).
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from core.errors import StudioError

__all__ = ["ArchiveSummary", "base_clusters", "perturb", "write_archive"]

NOTE = ("Synthetic archive for measuring cost (time, memory, index bytes) as the archive grows, not quality: its "
        "texts are the bundled QQP and TrecQA texts, sampled and perturbed; its qrels are copies of QQP's paraphrase "
        "clusters. Do not report retrieval quality on it.")


@dataclass(frozen=True)
class ArchiveSummary:
    """What ``write_archive`` wrote: counts, the seed and the seconds it took."""

    folder: str
    documents: int
    queries: int
    qrels: int
    rounds: int
    seed: int
    seconds: float
    note: str = NOTE


def base_clusters() -> list[list[str]]:
    """The bundled texts as clusters, in collection order: QQP's paraphrase clusters (each cluster at its first
    member's place), then TrecQA's distinct candidate sentences as clusters of one."""
    from core.data.clusters import paraphrase_clusters
    from core.data.datasets import load_dataset

    qqp = load_dataset("qqp-bimpm")
    cluster_of = paraphrase_clusters(qqp.pairs["all"])
    members: dict[str, list[str]] = {}
    for qid in qqp.corpus:
        members.setdefault(cluster_of.get(qid, qid), []).append(qqp.corpus[qid])
    seen = {t for texts in members.values() for t in texts}
    out = list(members.values())
    for text in load_dataset("trecqa").corpus.values():
        if text not in seen:
            seen.add(text)
            out.append([text])
    return out


def perturb(text: str, rng: np.random.Generator) -> str:
    """One word dropped and two neighbouring words swapped (texts of fewer than four words are kept as they are)."""
    words = text.split(" ")
    if len(words) < 4:
        return text
    del words[int(rng.integers(0, len(words)))]
    j = int(rng.integers(0, len(words) - 1))
    words[j], words[j + 1] = words[j + 1], words[j]
    return " ".join(words)


def _clusters(base: list[list[str]], seed: int) -> Iterator[tuple[int, int, list[str]]]:
    """(round, cluster number, texts) for ever: round 0 as bundled, later rounds shuffled and perturbed."""
    round_ = 0
    while True:
        rng = np.random.default_rng([seed, round_])
        order = range(len(base)) if round_ == 0 else rng.permutation(len(base))
        for c in order:
            texts = base[int(c)] if round_ == 0 else [perturb(t, rng) for t in base[int(c)]]
            yield round_, int(c), texts
        round_ += 1


def write_archive(n: int, out: str | Path, seed: int = 0) -> ArchiveSummary:
    """Write the archive of ``n`` documents to the new folder ``out`` (module docstring); returns its summary."""
    if n < 1:
        raise StudioError(f"--n must be at least 1, got {n}")
    out = Path(out)
    if out.exists():
        raise StudioError(f"{out} already exists; pick a new folder (nothing was written)")
    start = time.perf_counter()
    base = base_clusters()
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "qrels").mkdir(parents=True)
    documents = queries = qrels = rounds = 0
    with (staging / "corpus.jsonl").open("w", encoding="utf-8") as corpus, \
            (staging / "queries.jsonl").open("w", encoding="utf-8") as query_file, \
            (staging / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels_file:
        qrels_file.write("query-id\tcorpus-id\tscore\n")
        for round_, cluster, texts in _clusters(base, seed):
            texts = texts[:n - documents]
            ids = [f"r{round_}c{cluster}m{m}" for m in range(len(texts))]
            for doc_id, text in zip(ids, texts):
                corpus.write(json.dumps({"_id": doc_id, "title": "", "text": text}, ensure_ascii=False) + "\n")
            if len(ids) > 1:
                for doc_id, text in zip(ids, texts):
                    query_file.write(json.dumps({"_id": doc_id, "text": text}, ensure_ascii=False) + "\n")
                    qrels_file.writelines(f"{doc_id}\t{other}\t1\n" for other in ids if other != doc_id)
                queries += len(ids)
                qrels += len(ids) * (len(ids) - 1)
            documents += len(texts)
            rounds = round_ + 1
            if documents >= n:
                break
    summary = ArchiveSummary(str(out), documents, queries, qrels, rounds, seed, round(time.perf_counter() - start, 2))
    (staging / "metadata.json").write_text(json.dumps({"synthetic": True, "measures": "cost, not quality",
                                                       **asdict(summary)}, indent=2) + "\n", encoding="utf-8")
    (staging / "README.md").write_text(
        f"# Synthetic archive of {documents:,} questions (seed {seed})\n\n{NOTE}\n\n"
        f"Made by `python -m bench.large_archive --n {n} --seed {seed}` (see that module's docstring): "
        f"{rounds} round(s) over the bundled texts, {queries:,} queries, {qrels:,} qrels rows.\n", encoding="utf-8")
    staging.rename(out)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, required=True, help="documents in the archive")
    ap.add_argument("--out", required=True, help="a new folder (refused when it exists)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    summary = write_archive(args.n, args.out, args.seed)
    print(f"wrote {summary.folder}: {summary.documents:,} documents, {summary.queries:,} queries, "
          f"{summary.qrels:,} qrels rows in {summary.seconds:.1f} s ({NOTE.split(':')[0]})")
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
