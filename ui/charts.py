"""Charts the pages share that must stay light in the browser (Vega-Lite through Altair).

Vega draws SVG: a bar per query is a DOM node per query (1,781 on QQP's test split took the browser seconds),
so per-query curves are one area path, and picking is a brush over ranks rather than a click per bar."""
from __future__ import annotations

import altair as alt
import pandas as pd

BRUSH = "pick"  # the selection parameter's name: event.selection[BRUSH] == {"rank": [low, high]}


def delta_chart(deltas: list[tuple[str, float]], title: str) -> alt.Chart:
    """Per-query differences sorted by Δ (rank 1 = the largest gain) as one area; dragging over ranks selects them."""
    frame = pd.DataFrame({"rank": range(1, len(deltas) + 1), "delta": [d for _, d in deltas]})
    brush = alt.selection_interval(name=BRUSH, encodings=["x"])
    return (alt.Chart(frame, height=320)
            .mark_area(interpolate="step-after", line=True, opacity=0.6)
            .encode(x=alt.X("rank:Q", title="queries, sorted by Δ (drag to list a range below)"),
                    y=alt.Y("delta:Q", title=title))
            .add_params(brush))


def brushed_ranks(selection: dict | None, n: int) -> range | None:
    """The 1-based ranks a brush over :func:`delta_chart` covers (None: no brush)."""
    span = (selection or {}).get(BRUSH) or {}
    bounds = span.get("rank") if isinstance(span, dict) else None
    if not bounds or len(bounds) != 2:
        return None
    low, high = sorted(float(b) for b in bounds)
    first, last = max(1, int(-(-low // 1))), min(n, int(high // 1))
    return range(first, last + 1) if first <= last else None
