"""An owner's view of a campaign's results: everyone's labels, decisions, conflicts, history, progress,
agreement, and the qrels one aggregation rule (majority, adjudicated, mean at a threshold) makes of them,
written as a TREC qrels file."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.data.trec import qrels_text
from core.judging.agreement import CampaignLabel
from core.judging.campaign_records import (Adjudication, CampaignError, CampaignHistory, Conflict, ExportResult,
                                           Progress)
from core.judging.campaign_rows import CampaignRows
from core.judging.schema import (Annotator, CampaignAdjudicationRow, CampaignHistoryRow, CampaignItemRow,
                                 CampaignLabelRow, CampaignRow, CampaignSlotRow, _utc)

RULES = ("majority", "adjudicated", "mean")


def rule_name(rule: str, threshold: float = 1.0) -> str:
    """The rule as named in file names and output: ``majority``, ``adjudicated``, ``mean-ge-1.5``."""
    if rule not in RULES:
        raise CampaignError(f"aggregation rule must be one of {', '.join(RULES)}, got {rule!r}")
    return f"mean-ge-{threshold:g}" if rule == "mean" else rule


def rule_description(rule: str, threshold: float = 1.0) -> str:
    """One sentence: what the rule does (printed by the CLI and the page beside the file)."""
    rule_name(rule, threshold)
    return {
        "majority": "majority: the most frequent label of the annotators; a tie goes to the lower label",
        "adjudicated": "adjudicated: the owner's decision where there is one, otherwise the majority "
                       "(a tie goes to the lower label)",
        "mean": f"mean-ge-{threshold:g}: 1 when the mean label is at least {threshold:g}, else 0 (binary)",
    }[rule]


def aggregate(labels: Sequence[int], rule: str, adjudicated: int | None = None, threshold: float = 1.0) -> int | None:
    """One label from an item's ratings under ``rule`` (None: nothing to go on)."""
    rule_name(rule, threshold)
    if rule == "adjudicated" and adjudicated is not None:
        return adjudicated
    if not labels:
        return None
    if rule == "mean":
        return int(sum(labels) / len(labels) >= threshold)
    counts = Counter(labels)
    top = max(counts.values())
    return min(label for label, n in counts.items() if n == top)


class CampaignResults(CampaignRows):
    """Owners' reads of a campaign and its export (``core.judging.campaigns.CampaignStore`` is one)."""

    def labels(self, actor: str, name: str) -> list[CampaignLabel]:
        """Every annotator's current label (owners only), in queue order."""
        def fn(s: Session, c: CampaignRow) -> list[CampaignLabel]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignLabelRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignLabelRow.annotator_id)
                             .join(CampaignItemRow, CampaignItemRow.id == CampaignLabelRow.item_id)
                             .where(CampaignItemRow.campaign_id == c.id)).all()
            out = [CampaignLabel(l.item_id, keys[l.item_id][0], keys[l.item_id][1], who, l.label, l.reason, l.rationale,
                                 _utc(l.created_at)) for l, who in rows]
            return sorted(out, key=lambda x: (keys[x.item_id][2].position, x.annotator))

        return self._owner_read(actor, name, "see everyone's labels", fn)

    def adjudications(self, actor: str, name: str) -> list[Adjudication]:
        """Owners' decisions (owners only)."""
        def fn(s: Session, c: CampaignRow) -> list[Adjudication]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignAdjudicationRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignAdjudicationRow.annotator_id)
                             .where(CampaignAdjudicationRow.item_id.in_(list(keys)))).all()
            return [Adjudication(a.item_id, keys[a.item_id][0], keys[a.item_id][1], who, a.label, a.rationale,
                                 _utc(a.created_at)) for a, who in rows]

        return self._owner_read(actor, name, "see adjudications", fn)

    def conflicts(self, actor: str, name: str) -> list[Conflict]:
        """Items whose annotators disagree (owners only): what the adjudication view lists."""
        labels = self.labels(actor, name)
        decided = {a.item_id: a.label for a in self.adjudications(actor, name)}

        def fn(s: Session, c: CampaignRow) -> dict[int, tuple[str, str, CampaignItemRow]]:
            return self._item_keys(s, c)

        keys = self._owner_read(actor, name, "adjudicate", fn)
        by_item: dict[int, dict[str, int]] = {}
        for lab in labels:
            if lab.label is not None:
                by_item.setdefault(lab.item_id, {})[lab.annotator] = lab.label
        out = []
        for item_id, votes in by_item.items():
            if len(set(votes.values())) > 1:
                qid, doc, row = keys[item_id]
                out.append(Conflict(item_id, qid, row.query_text, doc, row.doc_text, dict(sorted(votes.items())),
                                    decided.get(item_id)))
        return sorted(out, key=lambda x: keys[x.item_id][2].position)

    def history(self, actor: str, name: str) -> list[CampaignHistory]:
        """Every logged change of the campaign, oldest first (owners only)."""
        def fn(s: Session, c: CampaignRow) -> list[CampaignHistory]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignHistoryRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignHistoryRow.annotator_id)
                             .where(CampaignHistoryRow.item_id.in_(list(keys))).order_by(CampaignHistoryRow.id)).all()
            return [CampaignHistory(h.item_id, keys[h.item_id][0], keys[h.item_id][1], who, h.action, h.label,
                                    h.previous_label, h.reason, h.rationale, _utc(h.created_at)) for h, who in rows]

        return self._owner_read(actor, name, "read the history", fn)

    def progress(self, actor: str, name: str) -> Progress:
        """Per-annotator and per-query progress (owners only)."""
        def fn(s: Session, c: CampaignRow) -> Progress:
            keys = self._item_keys(s, c)
            slots = s.execute(select(CampaignSlotRow.item_id, Annotator.name)
                              .join(Annotator, Annotator.id == CampaignSlotRow.annotator_id)
                              .where(CampaignSlotRow.item_id.in_(list(keys)))).all()
            done = set(s.execute(select(CampaignLabelRow.item_id, Annotator.name)
                                 .join(Annotator, Annotator.id == CampaignLabelRow.annotator_id)
                                 .where(CampaignLabelRow.item_id.in_(list(keys)))).all())
            out = Progress(items=len(keys))
            per_item: Counter = Counter()
            for item_id, who in slots:
                labelled = (item_id, who) in done
                d, a = out.annotators.get(who, (0, 0))
                out.annotators[who] = (d + labelled, a + 1)
                per_item[item_id] += labelled
            for item_id, (qid, _, _) in keys.items():
                q = out.queries.setdefault(qid, {"items": 0, "ratings": 0, "wanted": 0, "complete": 0})
                q["items"] += 1
                q["ratings"] += per_item[item_id]
                q["wanted"] += c.overlap
                q["complete"] += per_item[item_id] >= c.overlap
            out.complete = sum(q["complete"] for q in out.queries.values())
            out.annotators = dict(sorted(out.annotators.items()))
            return out

        return self._owner_read(actor, name, "see everyone's progress", fn)

    def agreement(self, actor: str, name: str):
        """Krippendorff's α, Fleiss' and Cohen's κ, per campaign and per query (owners only):
        ``core.judging.agreement.CampaignAgreement``."""
        from core.judging.agreement import campaign_agreement

        return campaign_agreement(self.labels(actor, name), self.campaign(name).max_label)

    # -- export
    def qrels(self, actor: str, name: str, rule: str = "majority", threshold: float = 1.0
              ) -> tuple[dict[str, dict[str, int]], int]:
        """(qrels, items skipped) under ``rule`` (owners only); can't-judge ratings are left out."""
        rule_name(rule, threshold)
        labels = self.labels(actor, name)
        decided = {a.item_id: a.label for a in self.adjudications(actor, name)}
        keys = self._owner_read(actor, name, "export", lambda s, c: self._item_keys(s, c))
        votes: dict[int, list[int]] = {i: [] for i in keys}
        for lab in labels:
            if lab.label is not None:
                votes[lab.item_id].append(lab.label)
        qrels: dict[str, dict[str, int]] = {}
        skipped = 0
        for item_id, (qid, doc, _) in keys.items():
            value = aggregate(votes[item_id], rule, decided.get(item_id), threshold)
            if value is None:
                skipped += 1
            else:
                qrels.setdefault(qid, {})[doc] = value
        return qrels, skipped

    def export_qrels(self, actor: str, name: str, folder: str | Path, rule: str = "majority",
                     threshold: float = 1.0) -> ExportResult:
        """Write TREC qrels (``qid 0 docid label``) to ``folder/<campaign>.<rule>.qrels`` (owners only)."""
        qrels, skipped = self.qrels(actor, name, rule, threshold)
        path = Path(folder) / export_filename(name, rule, threshold)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(qrels_text(qrels), encoding="utf-8")
        return ExportResult(path, rule_name(rule, threshold), sum(len(v) for v in qrels.values()), len(qrels), skipped)


def export_filename(campaign: str, rule: str, threshold: float = 1.0) -> str:
    """``<campaign>.<rule>.qrels`` with the campaign name made file-safe: the rule is in the name."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in campaign)
    return f"{safe}.{rule_name(rule, threshold)}.qrels"
