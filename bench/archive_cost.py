"""Cost as the archive grows: each stage of the app's work on a synthetic archive of N questions
(``bench.large_archive``), its seconds and peak memory, at several N.

    python -m bench.archive_cost --sizes 36737 100000 --encode-sizes 36737 --out bench/reports/archive_cost.json

Stages, each in a fresh child process (``--stage``), in order for each N: ``generate`` (write the BEIR folder),
``import`` (``core.data.imports.import_dataset``: streamed check, block copy), ``bm25`` (open the imported dataset,
build the BM25 index, read it back memory-mapped, time single queries), ``encode`` (MiniLM on the executor's Ray
Data pool, each worker writing its shard's vectors: ``encode_to_shards``), ``index`` (faiss indexes filled from the
shards: exact, IVF trained on a sample, HNSW; recall@10 of each against exact on sampled collection vectors),
``tree`` (the tree-bert k-means tree over the vectors: distance computations per query and MAP@20 against
compute-all on sampled queries, the query dropped from its own ranking). Memory: ``peak_all_mb`` is the sum of the
resident memory of the child and all its descendants (Ray's processes included), sampled every 0.2 s;
``driver_peak_mb`` is the child's own peak (``getrusage``), ``driver_before_mb`` its resident memory when the
stage's work began (after the dataset was opened). The archive is synthetic: the numbers are cost, not quality
(its MAP only compares the tree with compute-all on the same qrels). A stage not asked for at a size is recorded
as not measured.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.error_analysis_speed import python_speed
from bench.measure import current_rss_mb, peak_rss_mb, percentiles
from bench.reporting import head_commit, write_report

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "bench" / "reports"
STAGES = ("generate", "import", "bm25", "encode", "index", "tree")
CHEAP = ("generate", "import", "bm25")  # every size; the rest only at --encode-sizes / --tree-sizes
SAMPLE_QUERIES = 500


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _dataset(n: int):  # noqa: ANN202 - a core Dataset
    from core.data.datasets import load_dataset

    return load_dataset(f"user/archive-{n}")


def _generate(n: int, work: Path) -> dict:
    from bench.large_archive import write_archive

    summary = write_archive(n, work / f"archive-{n}")
    return {"documents": summary.documents, "queries": summary.queries, "bytes": _dir_bytes(work / f"archive-{n}")}


def _import(n: int, work: Path) -> dict:
    from core.data.imports import import_dataset

    name = import_dataset("beir", work / f"archive-{n}", f"archive-{n}")
    return {"dataset": name}


def _bm25(n: int, work: Path) -> dict:
    from core.registry import system_dir
    from core.retrieval import bm25

    start = time.perf_counter()
    ds = _dataset(n)
    opened = time.perf_counter() - start
    before = current_rss_mb()
    start = time.perf_counter()
    bm25.build(ds)
    built = time.perf_counter() - start
    folder = system_dir(ds.name, "bm25", None)
    retriever = bm25.load(ds, mmap=True)
    queries = list(ds.queries.values())[:200]
    seconds = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.retrieve([q], 100)
        seconds.append(time.perf_counter() - t0)
    return {"open_seconds": round(opened, 2), "driver_before_mb": before, "build_seconds": round(built, 2),
            "index_bytes": _dir_bytes(folder / "index"), "query": percentiles(seconds),
            "seconds": round(built, 2)}


def _encoder():  # noqa: ANN202 - the MiniLM encoder
    from core.retrieval.bert import MiniLMEncoder

    return MiniLMEncoder.pretrained("mean", 64)


def _encode(n: int, work: Path) -> dict:
    from core.executor import cluster_cpus
    from core.retrieval.encoding import encode_to_shards

    from core.retrieval import encoding

    texts = list(_dataset(n).corpus.values())
    encoder = _encoder()
    on_pool = n >= encoding.RAY_MIN_TEXTS  # MiniLM has a recipe and this is the main thread, not a job
    before = current_rss_mb()
    start = time.perf_counter()
    manifest = encode_to_shards(encoder, texts, work / f"shards-{n}", normalize=True)
    seconds = time.perf_counter() - start
    return {"driver_before_mb": before, "seconds": round(seconds, 1), "texts_per_s": round(n / seconds, 1),
            "actors": cluster_cpus(), "on_pool": on_pool, "shards": len(manifest.shards),
            "vectors_bytes": manifest.bytes,
            "encoder": encoder.encoder_id}


def _index_bytes(index) -> int:  # noqa: ANN001 - a faiss index
    import faiss

    return int(faiss.serialize_index(index).nbytes)


def _index(n: int, work: Path) -> dict:
    from core.retrieval.indexing import IndexSpec, build_index_from_shards, recall_at_k
    from core.retrieval.vector_shards import ShardManifest

    manifest = ShardManifest.load(work / f"shards-{n}")
    before = current_rss_mb()
    rng = np.random.default_rng(0)
    queries = manifest.gather(np.sort(rng.choice(manifest.count, size=min(1000, manifest.count), replace=False)))
    out: dict = {"driver_before_mb": before}
    exact = None
    for preset in ("flat", "ivf", "hnsw"):
        spec = IndexSpec.from_preset(preset, manifest.count, manifest.dim)
        start = time.perf_counter()
        index = build_index_from_shards(manifest, spec)
        seconds = time.perf_counter() - start
        exact = index if preset == "flat" else exact
        out[preset] = {"factory": spec.factory, "search_params": spec.search_params, "seconds": round(seconds, 2),
                       "bytes": _index_bytes(index), "recall_at_10": round(recall_at_k(index, exact, queries), 4)}
    out["seconds"] = round(sum(out[p]["seconds"] for p in ("flat", "ivf", "hnsw")), 2)
    return out


def _tree(n: int, work: Path) -> dict:
    import faiss

    from core.evaluation_contract import evaluate_contract
    from core.retrieval.tree import TreeBertConfig
    from core.retrieval.tree_search import KMeansTree
    from core.retrieval.vector_shards import ShardManifest

    ds = _dataset(n)
    vectors = np.asarray(ShardManifest.load(work / f"shards-{n}").assemble(work / f"vectors-{n}.npy"))
    before = current_rss_mb()
    config = TreeBertConfig()
    start = time.perf_counter()
    tree = KMeansTree.build(vectors, config.tree_config())
    built = time.perf_counter() - start
    ids = list(ds.corpus)
    row = {d: i for i, d in enumerate(ids)}
    rng = np.random.default_rng(0)
    qids = sorted(rng.choice(list(ds.queries), size=min(SAMPLE_QUERIES, len(ds.queries)), replace=False).tolist())
    q = vectors[[row[x] for x in qids]]
    found = tree.search(q, n=21, beam=config.beam)
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    scores, rows = exact.search(q, 21)

    def run(result_rows, result_scores) -> dict:
        return {x: {ids[r]: float(s) for r, s in zip(rr, ss) if r >= 0 and ids[r] != x}
                for x, rr, ss in zip(qids, result_rows, result_scores)}

    metric = "map@20"
    tree_eval = evaluate_contract(ds.qrels, run(found.rows, found.scores), [metric], queries=qids)
    exact_eval = evaluate_contract(ds.qrels, run(rows, scores), [metric], queries=qids)
    return {"driver_before_mb": before, "seconds": round(built, 2), "build_seconds": round(built, 2),
            "branching": config.branching, "beam": config.beam, "queries": len(qids),
            "distance_computations": round(float(np.mean(found.computations)), 1), "compute_all": int(len(vectors)),
            "map_at_20_tree": round(_headline(tree_eval, metric), 4),
            "map_at_20_compute_all": round(_headline(exact_eval, metric), 4)}


def _headline(evaluation, metric: str) -> float:  # noqa: ANN001 - core.evaluation_contract.Evaluation
    return float(evaluation.headline_values[metric])


RUN = {"generate": _generate, "import": _import, "bm25": _bm25, "encode": _encode, "index": _index, "tree": _tree}


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and every process below it (``/proc``), in MiB."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    family, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in family} - family
        family |= more
        grew = bool(more)
    total = 0
    for p in family:
        try:
            total += next(int(line.split()[1]) for line in Path(f"/proc/{p}/status").read_text().splitlines()
                          if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
    return total / 1024


def measure(stage: str, n: int, work: Path, env: dict[str, str], pool: bool = False) -> dict:
    """Run one stage in a child process; its result, seconds, and peak memory (module docstring)."""
    child = subprocess.Popen([sys.executable, "-m", "bench.archive_cost", "--stage", stage, "--n", str(n),
                              "--work", str(work), *(["--pool"] if pool else [])], stdout=subprocess.PIPE, env=env,
                             text=True, cwd=ROOT)
    peak, start = 0.0, time.perf_counter()
    while child.poll() is None:
        peak = max(peak, _tree_rss_mb(child.pid))
        time.sleep(0.2)
    wall = time.perf_counter() - start
    lines = (child.stdout.read() if child.stdout else "").strip().splitlines()
    if child.returncode != 0 or not lines:
        return {"error": f"exit code {child.returncode}", "wall_seconds": round(wall, 1)}
    result = json.loads(lines[-1])
    return {**result, "wall_seconds": round(wall, 1), "peak_all_mb": round(peak, 1)}


PROJECT_TO = 10_000_000
MACHINES = (1, 2, 8)
PARALLEL = ("encode",)  # spread over machines by the Ray Data pool; the other stages run in one process


def projection(rows: list[dict], to: int = PROJECT_TO) -> dict:
    """A linear projection to ``to`` documents, labelled as such: each stage's rate (documents per second) at the
    largest size that measured it, divided over machines only for the stages the executor spreads (``PARALLEL``);
    the vectors' bytes scale with the documents. Not a measurement: the table says so."""
    out: dict = {"documents": to, "machines": list(MACHINES), "rule": (
        "seconds = documents / the rate measured at the largest N that measured the stage (this shared machine); "
        "the encoding divided over machines (the Ray Data pool), the other stages in one process; linear, not "
        "measured"), "stages": {}}
    for stage in ("generate", "import", "bm25", "encode", "index"):
        done = [r for r in rows if not r[stage].get("not_measured") and "error" not in r[stage]]
        if not done:
            continue
        last = max(done, key=lambda r: r["n"])
        seconds = last[stage].get("seconds", last[stage].get("wall_seconds"))
        rate = last["n"] / max(float(seconds), 1e-9)
        split = stage in PARALLEL
        out["stages"][stage] = {"from_n": last["n"], "docs_per_s": round(rate, 1), "seconds": {
            str(m): round(to / rate / (m if split else 1)) for m in MACHINES}}
        if stage == "encode":
            out["stages"][stage]["vectors_bytes"] = int(last[stage]["vectors_bytes"] / last["n"] * to)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[36_737, 100_000])
    ap.add_argument("--encode-sizes", type=int, nargs="*", default=[36_737], help="sizes also encoded and indexed")
    ap.add_argument("--tree-sizes", type=int, nargs="*", default=None, help="default: the encode sizes")
    ap.add_argument("--work", default="/tmp/qrs-archive-cost")
    ap.add_argument("--out", default=str(REPORTS / "archive_cost.json"))
    ap.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pool", action="store_true", help="encode on the Ray Data pool at every size")
    ap.add_argument("--project", metavar="REPORT", help="add the linear projection to a finished report and stop")
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.project:
        report = json.loads(Path(args.project).read_text(encoding="utf-8"))
        write_report(args.project, {**report, "projection": projection(report["rows"])})
        return 0
    if args.stage:  # the child: one stage, one JSON line
        if args.pool:  # the encoding on the Ray Data pool at every size (below its threshold too)
            from core.retrieval import encoding

            encoding.RAY_MIN_TEXTS = 0
        result = RUN[args.stage](args.n, work)
        print(json.dumps({**result, "driver_peak_mb": peak_rss_mb()}))
        return 0
    shutil.rmtree(work, ignore_errors=True)
    (work / "var").mkdir(parents=True)
    env = {**os.environ, "QRS_VAR": str(work / "var")}
    trees = args.encode_sizes if args.tree_sizes is None else args.tree_sizes
    load_before, speed_before = [round(x, 2) for x in os.getloadavg()], python_speed()
    commit = head_commit()  # the commit the run started at, whatever is committed while it runs
    rows: list[dict] = []
    for n in args.sizes:
        wanted = set(CHEAP) | ({"encode", "index"} if n in args.encode_sizes else set()) | (
            {"tree"} if n in trees and n in args.encode_sizes else set())
        row: dict = {"n": n}
        for stage in STAGES:
            row[stage] = measure(stage, n, work, env, args.pool) if stage in wanted else {"not_measured": True}
            print(f"n={n:,} {stage}: {row[stage]}", file=sys.stderr)
        rows.append(row)
        (work / f"vectors-{n}.npy").unlink(missing_ok=True)
        _write(args, argv, commit, rows, load_before, speed_before, done=len(rows) == len(args.sizes))
    return 0


def _write(args: argparse.Namespace, argv: list[str] | None, commit: str, rows: list[dict],
           load_before: list[float], speed_before: float, done: bool) -> None:
    """The report so far (rewritten after each size, so a stopped run keeps the sizes it finished)."""
    report = {"command": "python -m bench.archive_cost " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": commit, "archive": "synthetic (bench.large_archive, seed 0): cost, not quality",
              "machine": f"{os.cpu_count()} cores shared with other work", "finished": done,
              "load_before": load_before, "python_speed_before": speed_before,
              "load_after": [round(x, 2) for x in os.getloadavg()], "python_speed_after": python_speed(),
              "memory": ("peak_all_mb: the child's process tree (Ray's processes included) sampled every 0.2 s; "
                         "driver_peak_mb: the child's own getrusage peak"), "rows": rows,
              "projection": projection(rows)}
    write_report(args.out, report)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
