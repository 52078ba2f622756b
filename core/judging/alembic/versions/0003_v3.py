"""Schema version 3: a label is keyed by (dataset, query, document, annotator), not by the text hash.

Before, a document row was (dataset, doc id, text hash), so after a text change one annotator held
two current labels for one document. Now:

- ``documents`` has one row per (dataset, doc id) (unique index ``uq_document_id``); its
  ``text_hash`` is the newest text seen for that id;
- ``judgments.doc_hash`` keeps the hash of the text each label was given on; a label whose
  ``doc_hash`` differs from the document's current hash is *stale* (to be re-judged);
- ``judgment_history.note_before`` keeps the note a change replaced, so undo restores it.

Merging: the document rows of one (dataset, doc id) collapse onto the oldest; where one annotator
held several labels for the merged document the most recent stays current (the others remain in
the history, re-pointed at the merged document, which also gets the most recently judged hash).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    op.add_column("judgments", sa.Column("doc_hash", sa.String(64), nullable=True))
    op.add_column("judgment_history", sa.Column("note_before", sa.Text(), nullable=True))
    op.add_column("judgment_history", sa.Column("doc_hash", sa.String(64), nullable=True))
    conn.execute(sa.text(
        "UPDATE judgments SET doc_hash = (SELECT d.text_hash FROM documents d WHERE d.id = judgments.document_id)"
    ))
    conn.execute(sa.text(
        "UPDATE judgment_history SET doc_hash = "
        "(SELECT d.text_hash FROM documents d WHERE d.id = judgment_history.document_id)"
    ))
    docs = conn.execute(sa.text("SELECT id, dataset, doc_id FROM documents ORDER BY id")).all()
    canonical: dict[tuple[str, str], int] = {}
    remap: dict[int, int] = {}
    for doc_pk, dataset, doc_id in docs:
        keep = canonical.setdefault((dataset, doc_id), doc_pk)
        if keep != doc_pk:
            remap[doc_pk] = keep
    if remap:
        rows = conn.execute(sa.text(
            "SELECT id, annotator_id, query_id, document_id, created_at, doc_hash FROM judgments ORDER BY id"
        )).all()
        groups: dict[tuple[int, int, int], list] = {}
        for row in rows:
            groups.setdefault((row.annotator_id, row.query_id, remap.get(row.document_id, row.document_id)),
                              []).append(row)
        newest_hash: dict[int, tuple] = {}
        for (_, _, doc_pk), members in groups.items():
            members.sort(key=lambda r: (str(r.created_at), r.id))
            for dropped in members[:-1]:
                conn.execute(sa.text("DELETE FROM judgments WHERE id = :i"), {"i": dropped.id})
            last = members[-1]
            key = (str(last.created_at), last.id)
            if doc_pk not in newest_hash or key > newest_hash[doc_pk][0]:
                newest_hash[doc_pk] = (key, last.doc_hash)
        for old, new in remap.items():
            conn.execute(sa.text("UPDATE judgments SET document_id = :n WHERE document_id = :o"), {"n": new, "o": old})
            conn.execute(sa.text("UPDATE judgment_history SET document_id = :n WHERE document_id = :o"),
                         {"n": new, "o": old})
            conn.execute(sa.text("DELETE FROM documents WHERE id = :o"), {"o": old})
        for doc_pk, (_, doc_hash) in newest_hash.items():
            if doc_pk in set(remap.values()):
                conn.execute(sa.text("UPDATE documents SET text_hash = :h WHERE id = :i"), {"h": doc_hash, "i": doc_pk})
    op.create_index("uq_document_id", "documents", ["dataset", "doc_id"], unique=True)
    op.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
