"""Charts the pages share that must stay light in the browser.

The per-query Δ curve is a PNG drawn by matplotlib on the server: an interactive chart of 1,781 queries cost the
browser seconds per visit (Plotly: a 4.7 MB bundle and one SVG node per bar; Vega-Lite: about 2 s of parsing and
drawing, measured), while the picture says the same. Ranks are chosen with a range slider beside it."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display on a server
import matplotlib.pyplot as plt  # noqa: E402


def delta_png(deltas: list[float], title: str, span: tuple[int, int] | None = None) -> bytes:
    """Per-query differences sorted by Δ (rank 1 = the largest gain) as a filled step curve; ``span`` (1-based,
    inclusive) is shaded: the ranks the list below shows."""
    n = len(deltas)
    ranks = list(range(1, n + 1))
    fig, ax = plt.subplots(figsize=(10, 2.6), dpi=100)
    try:
        ax.fill_between(ranks, deltas, step="post", color="#1f77b4", alpha=0.55, linewidth=0)
        ax.step(ranks, deltas, where="post", color="#1f77b4", linewidth=0.8)
        ax.axhline(0.0, color="#444444", linewidth=0.6)
        if span is not None and n and (span[0], span[1]) != (1, n):
            ax.axvspan(span[0] - 0.5, span[1] + 0.5, color="#ff7f0e", alpha=0.18, linewidth=0)
        ax.set_xlim(0.5, max(n, 1) + 0.5)
        ax.set_xlabel("queries, sorted by Δ")
        ax.set_ylabel("Δ")
        ax.set_title(title.replace("$", r"\$"), fontsize=10, loc="left")  # a run name is text, not mathtext
        ax.grid(axis="y", linewidth=0.3, alpha=0.5)
        fig.tight_layout()
        out = io.BytesIO()
        fig.savefig(out, format="png")
        return out.getvalue()
    finally:
        plt.close(fig)
