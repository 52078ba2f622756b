"""Word importance drawn the same way on the Keywords page and in Compare's "why": which systems can explain, a
per-pair heatmap on a diverging scale, and the top words named in one line."""
from __future__ import annotations

import plotly.graph_objects as go

from core.analysis.keywords import METHODS, WordImportance


def explainable_systems(ds) -> list[str]:
    """Every registered system (recipes included) that can score a (query, candidate) pair on ``ds`` and is built
    there (a cheap index counts as built: the loader builds it in seconds)."""
    from core.registry import list_systems, supports, system_module

    out = []
    for spec in list_systems():
        if not spec.pair_scoring or not supports(spec, ds):
            continue
        for variant in (None, *[r.variant for r in spec.recipes]):
            try:
                built = spec.cheap and variant is None or system_module(spec.name).is_built(ds, variant=variant)
            except Exception:  # noqa: BLE001 - a broken plugin is not offered (the Models page says why)
                built = False
            if built:
                out.append(spec.name + (f"@{variant}" if variant else ""))
    return out


def heatmap(result: WordImportance, height: int = 170) -> go.Figure:
    """Query and candidate words coloured by importance on a diverging scale normalised per pair: 0 is white, the
    largest |importance| of this pair is full red (pulls the pair together) or full blue (pushes it apart);
    exact values on hover."""
    width = max(len(result.query), len(result.candidate), 1)
    z, text, hover = [], [], []
    for pairs in (result.candidate, result.query):  # plotly draws row 0 at the bottom
        pad = width - len(pairs)
        z.append([float(x) for _, x in pairs] + [None] * pad)
        text.append([w for w, _ in pairs] + [""] * pad)
        hover.append([f"{x:+.4f}" for _, x in pairs] + [""] * pad)
    top = max((abs(x) for row in z for x in row if x is not None), default=0.0) or 1.0
    fig = go.Figure(go.Heatmap(z=z, text=text, texttemplate="%{text}", customdata=hover, zmin=-top, zmax=top,
                               zmid=0.0, colorscale="RdBu_r", hovertemplate="%{text}: %{customdata}<extra></extra>",
                               colorbar={"title": {"text": result.method}}))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10}, xaxis={"showticklabels": False},
                      yaxis={"tickvals": [0, 1], "ticktext": ["candidate", "query"]})
    return fig


def why_line(result: WordImportance, k: int = 3) -> str:
    """The top words named in one line: "bm25 (occlusion): query stop, depression, my; candidate overcome, …"."""
    q = ", ".join(w for w in result.top(k) if dict(result.query).get(w, 0) > 0) or "none raises the score"
    d = ", ".join(w for w in result.top(k, "candidate") if dict(result.candidate).get(w, 0) > 0) or "none raises it"
    return f"{result.system} ({result.method}, score {result.score:.3f}): query words {q}; candidate words {d}"


def measure_caption(method: str) -> str:
    """What the colours show."""
    return (f"Colours: {METHODS[method]}. Scale per pair: white = 0, full colour = this pair's largest |importance| "
            "(red raises the score, blue lowers it); exact values on hover.")
