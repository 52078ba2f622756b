"""Alembic environment of the judgment store, driven programmatically by ``core.judging.migrations``.

There is no alembic.ini: ``core.judging.migrations`` builds the ``Config`` in code and hands over an open
connection that is already inside the write transaction (``config.attributes["connection"]``), so a
migration and the version stamp commit or roll back together (SQLite and PostgreSQL both have
transactional DDL).
"""
from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True, version_table="alembic_version")
with context.begin_transaction():
    context.run_migrations()
