"""Case studies beyond the table: what moved since a case was saved, the queries two systems disagree on, and a
chart's export. The Compare state in a URL is ``core.judging.compare_state``; the tables and their Markdown,
LaTeX and CSV exports are ``core.judging.case_tables``.

- ``changes``: what moved between a saved table and today's models (entered, left, rank moves, RBO).
- ``disagreements``: the queries on which two runs differ most, by per-query metric delta
  (``core.evaluation.per_query``, ranx).
- ``figure_image``: PNG/SVG of a plotly figure via plotly's own export (kaleido >= 1, which drives a
  locally installed Chrome); ``None`` plus the reason when that is not possible (offline, no Chrome),
  in which case the page offers the chart's data as CSV and a self-contained HTML file instead.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.analysis.compare import rank_biased_overlap
from core.judging.case_tables import CaseTable
from core.evaluation import check_metrics, per_query


# ----------------------------------------------------------------------------- saved vs today
@dataclass(frozen=True)
class ColumnChange:
    """How one system's top-k changed between a saved table and a re-run."""

    system: str
    rbo: float | None  # None: the system is missing on one side (or failed)
    entered: tuple[str, ...] = ()  # doc ids new in today's top-k
    left: tuple[str, ...] = ()  # doc ids gone from today's top-k
    moves: tuple[tuple[str, int, int], ...] = ()  # (doc id, saved rank, today's rank) where they differ

    @property
    def unchanged(self) -> bool:
        return self.rbo is not None and not self.entered and not self.left and not self.moves


def changes(saved: CaseTable, today: CaseTable) -> list[ColumnChange]:
    """Per system of the saved table: RBO, entered/left ids and rank moves against today's run."""
    now = {c.system: c for c in today.columns}
    out = []
    for col in saved.columns:
        other = now.get(col.system)
        if other is None or other.error or col.error:
            out.append(ColumnChange(col.system, None))
            continue
        a, b = [h.doc_id for h in col.hits], [h.doc_id for h in other.hits]
        rank_b = {d: i + 1 for i, d in enumerate(b)}
        out.append(ColumnChange(
            col.system,
            rank_biased_overlap(a, b),
            tuple(d for d in b if d not in set(a)),
            tuple(d for d in a if d not in rank_b),
            tuple((d, i + 1, rank_b[d]) for i, d in enumerate(a) if d in rank_b and rank_b[d] != i + 1),
        ))
    return out


def change_marks(saved: CaseTable, today: CaseTable, system: str) -> dict[str, str]:
    """doc id -> ``new`` / ``↑n`` / ``↓n`` / ``=`` of today's hits against the saved column."""
    old = next((c for c in saved.columns if c.system == system), None)
    new = next((c for c in today.columns if c.system == system), None)
    if old is None or new is None:
        return {}
    rank = {h.doc_id: h.rank for h in old.hits}
    out = {}
    for h in new.hits:
        if h.doc_id not in rank:
            out[h.doc_id] = "new"
        else:
            delta = rank[h.doc_id] - h.rank
            out[h.doc_id] = "=" if delta == 0 else (f"↑{delta}" if delta > 0 else f"↓{-delta}")
    return out


# ----------------------------------------------------------------------------- disagreements
@dataclass(frozen=True)
class QueryDelta:
    """Per-query metric of two systems and their difference (``a - b``)."""

    query_id: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.a - self.b


def disagreements(qrels: Mapping[str, Mapping[str, int]], run_a: Any, run_b: Any, metric: str = "ndcg@10",
                  top: int = 10) -> list[QueryDelta]:
    """The ``top`` queries with the largest ``|metric(a) - metric(b)|`` (ties: query id order).

    Only queries with a relevant item are considered; a query one run misses scores 0 (ranx).
    """
    (metric,) = check_metrics([metric])
    qrels = {q: dict(v) for q, v in qrels.items() if any(label > 0 for label in v.values())}
    if not qrels or top <= 0:
        return []
    a = per_query(qrels, run_a, metric)
    b = per_query(qrels, run_b, metric)
    rows = [QueryDelta(q, a.get(q, 0.0), b.get(q, 0.0)) for q in qrels]
    rows.sort(key=lambda r: (-abs(r.delta), r.query_id))
    return rows[:top]


# ----------------------------------------------------------------------------- chart export
@dataclass(frozen=True)
class ImageExport:
    """Bytes of an exported figure, or why there are none."""

    data: bytes | None
    reason: str = ""
    mime: str = field(default="image/png")


def figure_image(figure: Any, fmt: str = "png") -> ImageExport:
    """PNG/SVG via plotly's ``to_image`` (kaleido >= 1 plus a local Chrome); never raises."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"format must be png or svg, got {fmt!r}")
    mime = "image/png" if fmt == "png" else "image/svg+xml"
    try:
        from plotly.io._kaleido import kaleido_available
    except ImportError:  # pragma: no cover - plotly layout changed
        kaleido_available = None
    if kaleido_available is not None and not kaleido_available():
        return ImageExport(None, "kaleido (>= 1) is not installed; plotly cannot write PNG/SVG here. "
                                 "Use the camera icon of the chart, the HTML file, or the chart data (CSV).", mime)
    try:
        return ImageExport(figure.to_image(format=fmt), "", mime)
    except Exception as exc:  # kaleido without Chrome (it would download one: impossible offline)
        return ImageExport(None, f"plotly image export failed ({type(exc).__name__}: {str(exc)[:200]}); "
                                 "use the chart data (CSV) or the HTML file", mime)


def figure_html(figure: Any) -> str:
    """A self-contained interactive HTML file of the figure (plotly.js inlined: works offline; its
    camera button saves a PNG in the browser)."""
    return figure.to_html(include_plotlyjs=True, full_html=True)
