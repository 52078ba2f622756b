"""BENCHMARKS.md's "Cost as the archive grows" table, rendered from ``bench/reports/archive_cost.json`` and
``archive_cost_large.json`` only (two runs of ``bench.archive_cost``: the sizes that are encoded, and the larger
sizes of the cheap stages): one column per archive size, one row per stage, "not measured" where no run measured a
stage at that size."""
from __future__ import annotations

from collections.abc import Callable

from bench.table_format import read_report, source_line

__all__ = ["archive_cost_table"]

FILES = ("archive_cost.json", "archive_cost_large.json")
DRIVER_FILES = ("archive_cost_driver.json", "archive_cost_driver_pool.json")  # the driver re-measured after its fix
NOT_MEASURED = "not measured"


def _mib(value: float | None) -> str:
    return "—" if value is None else f"{round(value):,} MiB"


def _bytes(value: int | None) -> str:
    return "—" if value is None else f"{round(value / 2**20):,} MiB"


def _cell(stage: dict, show: Callable[[dict], str]) -> str:
    if stage.get("not_measured"):
        return NOT_MEASURED
    if "error" in stage:
        return f"failed ({stage['error']})"
    return show(stage)


def _seconds_memory(s: dict) -> str:
    return f"{s['seconds'] if 'seconds' in s else s['wall_seconds']} s · {_mib(s.get('peak_all_mb'))}"


def _index(preset: str) -> Callable[[dict], str]:
    def show(s: dict) -> str:
        p = s[preset]
        return f"{p['seconds']} s · {_bytes(p['bytes'])} · recall@10 {p['recall_at_10']}"
    return show


ROWS: tuple[tuple[str, str, Callable[[dict], str]], ...] = (
    ("generate", "generate the archive: wall s · peak (all processes)", _seconds_memory),
    ("generate", "archive on disk", lambda s: _bytes(s["bytes"])),
    ("import", "import (streamed check, block copy): wall s · peak", _seconds_memory),
    ("bm25", "open the imported dataset: s", lambda s: f"{s['open_seconds']} s"),
    ("bm25", "BM25 build: s · peak", lambda s: f"{s['build_seconds']} s · {_mib(s.get('peak_all_mb'))}"),
    ("bm25", "BM25 index on disk", lambda s: _bytes(s["index_bytes"])),
    ("bm25", "BM25 query, memory-mapped: p50 / p95 ms", lambda s: f"{s['query']['p50_ms']} / {s['query']['p95_ms']}"),
    ("encode", "MiniLM encode to shards (Ray Data pool): s · peak", _seconds_memory),
    ("encode", "… the driver: before → peak", lambda s: f"{_mib(s['driver_before_mb'])} → {_mib(s['driver_peak_mb'])}"),
    ("encode", "… vectors on disk", lambda s: _bytes(s["vectors_bytes"])),
    ("index", "faiss exact from shards: s · bytes · recall@10", _index("flat")),
    ("index", "faiss IVF (trained on a sample): s · bytes · recall@10", _index("ivf")),
    ("index", "faiss HNSW32: s · bytes · recall@10", _index("hnsw")),
    ("index", "… peak (all processes)", lambda s: _mib(s.get("peak_all_mb"))),
    ("tree", "tree-bert k-means tree build: s · peak", lambda s: f"{s['build_seconds']} s · {_mib(s.get('peak_all_mb'))}"),
    ("tree", "tree: distance computations per query / compute-all",
     lambda s: f"{s['distance_computations']} / {s['compute_all']:,}"),
    ("tree", "tree: MAP@20 tree / compute-all (synthetic qrels)",
     lambda s: f"{s['map_at_20_tree']} / {s['map_at_20_compute_all']}"),
)


STAGE_NAMES = {"generate": "generate", "import": "import", "bm25": "BM25 build", "encode": "MiniLM encode",
               "index": "faiss indexes (all three)"}


def _merged_projection(reports: list[dict]) -> dict | None:
    """Each stage's projection from the report that measured it at the largest size."""
    projections = [r["projection"] for r in reports if r.get("projection", {}).get("stages")]
    if not projections:
        return None
    stages: dict = {}
    for p in projections:
        for stage, row in p["stages"].items():
            if stage not in stages or row["from_n"] > stages[stage]["from_n"]:
                stages[stage] = row
    return {**projections[0], "stages": stages}


def _projection(p: dict | None) -> list[str]:
    """The reports' linear projection, said to be one (not a measurement)."""
    if not p or not p.get("stages"):
        return []
    machines = p["machines"]
    out = ["", f"**Projection to {p['documents']:,} documents (linear, not measured):** {p['rule']}.", "",
           "| stage | from N | documents/s | " + " | ".join(f"{m} machine{'s' if m > 1 else ''}" for m in machines)
           + " |", "|---|---|---|" + "---|" * len(machines)]
    for stage, row in p["stages"].items():
        out.append(f"| {STAGE_NAMES.get(stage, stage)} | {row['from_n']:,} | {row['docs_per_s']} | "
                   + " | ".join(f"{row['seconds'][str(m)]:,} s" for m in machines) + " |")
    if "encode" in p["stages"]:
        out += ["", f"Vectors of {p['documents']:,} documents on disk: "
                f"{_bytes(p['stages']['encode']['vectors_bytes'])} (float32, from the measured bytes per document)."]
    return out


def _conditions(r: dict, file: str) -> str:
    return (f"`{file}`: load average {r['load_before']} before, {r['load_after']} after; speed probe "
            f"{r['python_speed_before']} s before, {r['python_speed_after']} s after")


def _on_pool(e: dict) -> bool:
    """The encode stage ran on the Ray Data pool (a report from before ``on_pool`` was recorded: more shards than one
    process cuts, ``SHARDS_PER_ACTOR``)."""
    from core.retrieval.encoding import SHARDS_PER_ACTOR

    return bool(e.get("on_pool", e["shards"] > SHARDS_PER_ACTOR))


def _driver_check() -> list[str]:
    """The driver's memory while encoding, re-measured after its fix (``DRIVER_FILES``), when those reports are there."""
    reports = [(f, r) for f in DRIVER_FILES if (r := read_report(f)) is not None]
    rows = sorted(((row["n"], row["encode"]) for _, r in reports for row in r["rows"]
                   if not row["encode"].get("not_measured") and "error" not in row["encode"]), key=lambda x: x[0])
    if not rows:
        return []
    out = ["", "The encoding's driver re-measured after the fix, tokenizing in chunks (same machine, shared; "
           + "; ".join(_conditions(r, f) for f, r in reports) + "):", "",
           "| N | where | encode s | driver before → peak | peak (all processes) |", "|---|---|---|---|---|"]
    for n, e in rows:
        where = "Ray Data pool" if _on_pool(e) else "in the driver (below the pool's threshold)"
        out.append(f"| {n:,} | {where} | {e['seconds']} s | {_mib(e['driver_before_mb'])} → "
                   f"{_mib(e['driver_peak_mb'])} | {_mib(e.get('peak_all_mb'))} |")
    return out + [""] + [source_line(r, f) for f, r in reports]


def archive_cost_table() -> list[str]:
    """The section's lines (none when no report is there)."""
    reports = [(f, r) for f in FILES if (r := read_report(f)) is not None]
    if not reports:
        return []
    rows = sorted((row for _, r in reports for row in r["rows"]), key=lambda row: row["n"])
    out = ["### Cost as the archive grows", "",
           "A **synthetic** archive (`python -m bench.large_archive`: the bundled QQP and TrecQA texts, sampled and "
           "perturbed, QQP's paraphrase clusters copied as qrels): these numbers are **cost, not quality**. Measured "
           f"on a machine **shared with other work** ({reports[0][1]['machine']}; "
           + "; ".join(_conditions(r, f) for f, r in reports) + "; idle is lower). Each stage ran in a fresh "
           "process; \"peak\" is the resident memory of that process and every process below it (Ray's included), "
           "sampled five times a second.", "",
           "| stage | " + " | ".join(f"N = {row['n']:,}" for row in rows) + " |",
           "|---|" + "---|" * len(rows)]
    for stage, label, show in ROWS:
        out.append(f"| {label} | " + " | ".join(_cell(row[stage], show) for row in rows) + " |")
    out += [line for _, r in reports if r.get("note") for line in ("", r["note"])]
    out += _driver_check()
    out += _projection(_merged_projection([r for _, r in reports]))
    if not all(r.get("finished", True) for _, r in reports):
        out += ["", "A run stopped before its last sizes (its report's note says why); the columns above are the sizes "
                "the runs finished."]
    out += ["", "Not measured in this run: every encoder other than MiniLM, Compare's latency per system, Annotate's "
            "pooling, Error Analysis and the pages on the large archive, Milvus, and the stages marked \"not "
            "measured\" above (encoding, the indexes and the tree only where a shared 2-core machine finishes them "
            "in minutes).", ""]
    return out + [source_line(r, f) for f, r in reports] + [""]
