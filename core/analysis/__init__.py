"""Error analysis, the Compare engine, stored runs, layer and keyword analyses (metrics: core.evaluation)."""

# Where Error Analysis takes its relevance labels from (``core.analysis.error_analysis``); kept here, free of
# heavy imports, so that the CLI can offer the choices without loading ranx.
LABEL_SOURCES = ("dataset", "judgments", "both")

__all__ = [  # what other packages may import (tests/test_package_surface.py)
    "LABEL_SOURCES", "budget", "compare", "compared_runs", "error_analysis", "error_buckets", "explanation_quality",
    "held_out", "keyword_quality", "keywords", "label_sources", "layers", "occlusion", "ppi", "ranking_faithfulness",
    "ranking_importance", "runs", "significance"
]
