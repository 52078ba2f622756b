"""Evaluation (ranx), error analysis, the Compare engine, stored runs, layer and keyword analyses."""
