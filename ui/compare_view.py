"""Compare's tables as data (no Streamlit calls): one aligned table for 1–8 systems, a summary row per
system, and the per-system detail table. The page renders them with ``st.dataframe`` (escaped text).

Layout: a row per rank and a column per system; each cell holds the relevance marks, the
question (wrapped: the row height grows with the number of columns) and the score. Up to
``MAX_PER_TABLE`` systems share one table; past that the systems are stacked into balanced tables
(5 -> 3 + 2, 8 -> 4 + 4), each aligned by rank, so rankings stay readable at 1,400 pixels (the main
area measures 930 px there with the sidebar open) with one to eight systems.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from core.analysis.compare import Comparison, Hit, SystemResult
from core.registry import display_name

MARKS = "✅ relevant (qrels) · 👤 user label (0/1/2) · ▫️ unjudged · ◆ in every column · ◇ only here"
TABLE_WIDTH = 840  # px the system columns share (main area at a 1,400-px window: 930 px; columns stretch)
MAX_SYSTEMS = 8  # systems one comparison shows (the README's "one to eight")
MAX_PER_TABLE = 4
RANK_WIDTH = 40
CHAR_PX = 7.0  # mean width of a character of the grid's 14-px font
LINE_PX = 19
TYPICAL_CHARS = 80  # most QQP questions are shorter (p90 ≈ 110)


@dataclass(frozen=True)
class Layout:
    """Pixel sizes of the aligned table for ``n`` system columns."""

    n: int
    column_width: int
    row_height: int
    height: int


ONE_LINE_ROW = 35  # the grid's own row height: one line of text


def layout(n_systems: int, k: int, longest: int | None = None) -> Layout:
    """Column width (shared fairly), row height and table height for ``k`` rows: rows as tall as the ``longest``
    cell's wrapped lines (default: a typical question), one line at the grid's own height (wrapping needs > 64 px,
    so two lines or more get at least 70)."""
    n = max(1, n_systems)
    width = max(100, TABLE_WIDTH // n)
    lines = math.ceil((TYPICAL_CHARS if longest is None else max(1, longest)) / max(1.0, (width - 16) / CHAR_PX))
    row = ONE_LINE_ROW if lines <= 1 else int(min(200, max(70, 14 + LINE_PX * lines)))
    return Layout(n, width, row, min(2400, row * max(1, k) + 40))


def longest_cell(table: pd.DataFrame) -> int:
    """Characters of the longest system cell of an aligned table (the rank column left out)."""
    return max((len(str(v)) for col in table.columns[1:] for v in table[col]), default=0)


def mark(hit: Hit, n_ok: int) -> str:
    """Relevance mark (qrels ✅, user label 👤n, unjudged ▫️) and sharing mark (◆ every column, ◇ only here)."""
    if hit.user_label is not None and (hit.qrel or 0) > 0:
        out = f"✅👤{hit.user_label}"
    elif (hit.qrel or 0) > 0:
        out = "✅"
    elif hit.user_label is not None:
        out = f"👤{hit.user_label}"
    else:
        out = "▫️"
    if n_ok > 1:
        out += "◆" if hit.shared_by == n_ok else ("◇" if hit.shared_by == 1 else "")
    return out


def cell(hit: Hit, n_ok: int, baseline: bool) -> str:
    """One aligned-table cell: marks, the question, then score (and movement against the baseline)."""
    meta = f"{hit.score:.3f}" + (f" · {hit.movement}" if baseline else "")
    return f"{mark(hit, n_ok)} {hit.text}  ({meta})"


def stacks(n: int, per_table: int = MAX_PER_TABLE) -> list[range]:
    """Balanced groups of consecutive system indexes, at most ``per_table`` each (8 -> 4 + 4, 5 -> 3 + 2)."""
    if n <= 0:
        return []
    tables = math.ceil(n / per_table)
    base, extra = divmod(n, tables)
    out, start = [], 0
    for i in range(tables):
        size = base + (i < extra)
        out.append(range(start, start + size))
        start += size
    return out


def ok_results(result: Comparison) -> list[SystemResult]:
    return [r for r in result.results if r.ok]


def aligned_table(result: Comparison, systems: range | None = None) -> pd.DataFrame:
    """Row per rank 1..k, column per system that ran (``systems``: indexes among those, default all;
    an empty cell where a system returned fewer hits). Marks count every system that ran."""
    ok = ok_results(result)
    n_ok = len(ok)
    chosen = [ok[i] for i in systems] if systems is not None else ok
    depth = max((len(r.hits) for r in chosen), default=0)
    data: dict[str, list] = {"#": list(range(1, depth + 1))}
    for r in chosen:
        cells = [cell(h, n_ok, bool(result.baseline)) for h in r.hits]
        data[unique_label(r.choice.label, data)] = cells + [""] * (depth - len(cells))
    return pd.DataFrame(data)


def unique_label(label: str, taken) -> str:
    out, i = label, 2
    while out in taken:
        out, i = f"{label} ({i})", i + 1
    return out


def summary_rows(result: Comparison) -> list[dict]:
    """One row per system: what runs (``registry.display_name``: the recipe, not just the paper's name), latency,
    work counters, recall against exact search, per-query metrics."""
    rows = []
    for r in result.results:
        row: dict = {"system": r.choice.label,
                     "what runs": display_name(r.choice.name + (f"@{r.choice.variant}" if r.choice.variant else ""))}
        if not r.ok:
            row["status"] = "not run (see message)"
            rows.append(row)
            continue
        row["status"] = "ok"
        row["ms"] = round(1000 * r.ranking.seconds, 1)
        for key in ("distance_computations", "pair_scorings"):
            if key in r.ranking.stats:
                row[key.replace("_", " ")] = int(r.ranking.stats[key])
        if r.recall_vs_exact is not None:
            row["recall vs exact"] = round(r.recall_vs_exact, 2)
        for m, v in r.metrics.items():
            row[m.replace("precision@1", "P@1")] = round(float(v), 3)
        rows.append(row)
    return rows


def detail_rows(res: SystemResult, n_ok: int, baseline: bool) -> pd.DataFrame:
    """One system's ranking with separate, sortable columns (rank, movement, marks, question, score)."""
    rows = []
    for h in res.hits:
        row = {"#": h.rank, "": mark(h, n_ok), "question": h.text, "score": h.score}
        if baseline:
            row = {"#": h.rank, "move": h.movement, "": row[""], "question": h.text, "score": h.score}
        rows.append(row)
    return pd.DataFrame(rows)
