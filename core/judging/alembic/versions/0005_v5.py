"""Schema version 5: people named in one canonical form (e-mail addresses lower-cased).

No table changes. Every stored name with an ``@`` (``annotators.name``, ``campaigns.created_by``) is
lower-cased, as ``core.judging.identity.canonical_identity`` names people from now on, so a label stored
under ``Bob@Lab.Example`` stays with ``bob@lab.example``. Where the lower-cased name is already taken by
another row (the same person stored twice under two spellings), both rows are kept as they are: merging
their labels could overwrite one of two different labels on the same item, and a migration loses nothing.
The canonical row is the one used from now on; an owner still sees the other spelling's labels.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, name FROM annotators")).all()
    taken = {name for _, name in rows}
    for row_id, name in rows:
        canonical = " ".join(name.split()).lower() if "@" in name else name
        if canonical != name and canonical not in taken:
            conn.execute(sa.text("UPDATE annotators SET name = :n WHERE id = :i"), {"n": canonical, "i": row_id})
            taken.discard(name)
            taken.add(canonical)
    for row_id, who in conn.execute(sa.text("SELECT id, created_by FROM campaigns")).all():
        if "@" in who and " ".join(who.split()).lower() != who:
            conn.execute(sa.text("UPDATE campaigns SET created_by = :n WHERE id = :i"),
                         {"n": " ".join(who.split()).lower(), "i": row_id})
    op.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
