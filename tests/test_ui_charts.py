"""ui.charts: the per-query Δ curve is a server-drawn PNG (light in the browser), also for odd run names."""
from ui.charts import delta_png


def test_delta_png_is_a_png_with_and_without_a_span():
    deltas = [0.5, 0.25, 0.0, 0.0, -0.25, -1.0]
    for span in (None, (1, 6), (2, 4)):
        png = delta_png(deltas, "mrr@100: frm − bm25", span)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def test_delta_png_takes_names_with_mathtext_characters_and_empty_input():
    assert delta_png([0.1, -0.1], "map: run:$weird_$ − bm25")[:4] == b"\x89PNG"
    assert delta_png([], "nothing")[:4] == b"\x89PNG"
