"""What the judgment store reads: current labels (and "can't judge" answers), history, qrels, statistics, and the
judging guidelines. Reads never take a write lock (WAL readers do not wait for writers); ``JudgmentStore``
(``core.judging.judgments``) adds the writes."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import select

from core.judging.database import StudioDatabase
from core.judging.label_records import HistoryEntry, Judgment, StoreStats, query_key, resolve_labels
from core.judging.schema import Annotator, DocumentRow, GuidelinesRow, HistoryRow, JudgmentRow, QueryRow, _utc, text_hash

__all__ = ["DEFAULT_GUIDELINES", "LabelReads", "with_context"]

DEFAULT_GUIDELINES = (
    "Is the candidate question asking the same thing as the query?\n"
    "2 = same question (a duplicate: one answer serves both)\n"
    "1 = related (overlapping topic, an answer would partly help)\n"
    "0 = not the same question\n"
    "Judge the meaning, not the wording. Use the note for doubts."
)


def with_context(row, document, dataset: str | None):
    """``select`` of judgment or history rows with their annotator name, query row and ``document`` (the
    document row or one of its columns), in insertion order, optionally for one dataset."""
    stmt = (
        select(row, Annotator.name, QueryRow, document)
        .join(Annotator, row.annotator_id == Annotator.id)
        .join(QueryRow, row.query_id == QueryRow.id)
        .join(DocumentRow, row.document_id == DocumentRow.id)
        .order_by(row.id)
    )
    return stmt if dataset is None else stmt.where(QueryRow.dataset == dataset)


class LabelReads(StudioDatabase):
    """The store's reads (a base of ``JudgmentStore``)."""

    # -- reads (never take a write lock; WAL readers do not wait for writers)
    def guidelines(self, dataset: str) -> str:
        """The guidelines of a dataset (``DEFAULT_GUIDELINES`` until edited)."""
        def read() -> str:
            with self._read() as s:
                row = s.get(GuidelinesRow, dataset)
                return row.text if row else DEFAULT_GUIDELINES

        return self._reading(read)

    def judgments(
        self, dataset: str | None = None, annotators: Iterable[str] | None = None, query: str | None = None
    ) -> list[Judgment]:
        """Current labels, optionally for one dataset, some annotators, one query text ("can't judge" rows,
        which hold no label, are not labels: ``cant_judged`` reads them)."""
        stmt = with_context(JudgmentRow, DocumentRow, dataset).where(JudgmentRow.label.is_not(None))
        if annotators is not None:
            from core.judging.identity import canonical_identity

            stmt = stmt.where(Annotator.name.in_([canonical_identity(a) for a in annotators]))
        if query is not None:
            stmt = stmt.where(QueryRow.text_hash == text_hash(query))

        def read() -> list[Judgment]:
            with self._read() as s:
                return [
                    Judgment(name, q.dataset, q.text, query_key(q.qid, q.text), d.doc_id, j.label, j.note,
                             dict(j.systems or {}), _utc(j.created_at), j.doc_hash or "",
                             bool(j.doc_hash) and j.doc_hash != d.text_hash)
                    for j, name, q, d in s.execute(stmt)
                ]

        return self._reading(read)

    def cant_judged(self, dataset: str, annotator: str, query: str) -> dict[str, tuple[str, str | None]]:
        """doc id -> (reason, note) of one annotator's "can't judge" answers on one query."""
        from core.judging.identity import canonical_identity

        stmt = (with_context(JudgmentRow, DocumentRow, dataset)
                .where(JudgmentRow.label.is_(None), Annotator.name == canonical_identity(annotator),
                       QueryRow.text_hash == text_hash(query)))

        def read() -> dict[str, tuple[str, str | None]]:
            with self._read() as s:
                return {d.doc_id: (j.reason or "", j.note) for j, _, _, d in s.execute(stmt)}

        return self._reading(read)

    def labels_for(self, annotator: str, dataset: str, query: str) -> dict[str, int]:
        """doc id -> label of one annotator for one query (marks already-judged pool items)."""
        return {j.doc_id: j.label for j in self.judgments(dataset, [annotator], query)}

    def stale(self, dataset: str | None = None) -> list[Judgment]:
        """Labels whose document text changed since they were given (to be re-judged)."""
        return [j for j in self.judgments(dataset) if j.stale]

    def history(self, dataset: str | None = None) -> list[HistoryEntry]:
        """Every change, oldest first."""
        stmt = with_context(HistoryRow, DocumentRow.doc_id, dataset)

        def read() -> list[HistoryEntry]:
            with self._read() as s:
                return [
                    HistoryEntry(name, q.dataset, query_key(q.qid, q.text), doc, h.action, h.label, h.previous_label,
                                 h.note, _utc(h.created_at), h.note_before)
                    for h, name, q, doc in s.execute(stmt)
                ]

        return self._reading(read)

    def annotators(self) -> list[str]:
        """Annotator names, sorted."""
        def read() -> list[str]:
            with self._read() as s:
                return sorted(s.scalars(select(Annotator.name)))

        return self._reading(read)

    def datasets(self) -> list[str]:
        """Datasets that have judged queries."""
        def read() -> list[str]:
            with self._read() as s:
                return sorted(set(s.scalars(select(QueryRow.dataset))))

        return self._reading(read)

    def qrels(self, dataset: str, annotators: Iterable[str] | None = None, resolve: str = "majority") -> dict[str, dict[str, int]]:
        """Judgments as qrels (query key -> doc id -> label), one label per pair.

        Several annotators on one pair: ``majority`` (ties -> the most recent label) or ``latest``.
        """
        return resolve_labels(self.judgments(dataset, annotators), resolve)

    def query_texts(self, dataset: str) -> dict[str, str]:
        """query key -> text of every judged query of a dataset."""
        def read() -> dict[str, str]:
            with self._read() as s:
                rows = s.scalars(select(QueryRow).where(QueryRow.dataset == dataset))
                return {query_key(q.qid, q.text): q.text for q in rows}

        return self._reading(read)

    def stats(self, dataset: str | None = None) -> StoreStats:
        """Counts of annotators, judgments, labels, stale labels, history."""
        js = self.judgments(dataset)
        out = StoreStats(judgments=len(js), history=len(self.history(dataset)), stale=sum(j.stale for j in js))
        for j in js:
            out.annotators[j.annotator] = out.annotators.get(j.annotator, 0) + 1
            out.label_counts[j.label] = out.label_counts.get(j.label, 0) + 1
        out.queries = len({(j.dataset, j.query_id) for j in js})
        out.documents = len({(j.dataset, j.doc_id) for j in js})
        out.label_counts = dict(sorted(out.label_counts.items()))
        return out

    def export_qrels(self, path: str | Path, dataset: str, annotators: Iterable[str] | None = None,
                     resolve: str = "majority") -> Path:
        """Write ``qid 0 docid label`` lines (TREC qrels), sorted."""
        from core.data.trec import qrels_text, write_text

        return write_text(path, qrels_text(self.qrels(dataset, annotators, resolve)))
