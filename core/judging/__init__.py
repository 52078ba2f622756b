"""Relevance judgments (SQLAlchemy store, Alembic migrations), pooling, agreement, case studies."""
