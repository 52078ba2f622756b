"""Error analysis, the Compare engine, stored runs, layer and keyword analyses (metrics: core.evaluation)."""

# Where Error Analysis takes its relevance labels from (``core.analysis.error_analysis``); kept here, free of
# heavy imports, so that the CLI can offer the choices without loading ranx.
LABEL_SOURCES = ("dataset", "judgments", "both")
