"""Relevance judgments (SQLAlchemy store, Alembic migrations), pooling, agreement, case studies."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "agreement", "auto_judge", "budget_plan", "calibration", "campaign_pool", "campaign_records", "campaign_results",
    "campaigns", "case_explanations", "case_tables", "casestudy", "casestudy_store", "compare_state", "database",
    "deletion", "identity", "judgments", "label_records", "panel_state", "pooling",
    "schema",  # bench.judging_speed polls the label requests' table to time each commit
]
