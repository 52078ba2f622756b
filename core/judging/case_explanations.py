"""Explanations a case study keeps: which words drove a system's score for one row, saved and exported with it."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CaseExplanation:
    """One row's word importance (``core.analysis.keywords.WordImportance``) as a case study keeps it."""

    system: str  # the column's label
    rank: int  # 1-based
    doc_id: str
    method: str
    score: float
    query: tuple[tuple[str, float], ...]
    candidate: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, system: str, rank: int, doc_id: str, importance) -> CaseExplanation:
        """From a ``WordImportance`` of that row."""
        return cls(system, rank, doc_id, importance.method, float(importance.score),
                   tuple((w, round(float(x), 6)) for w, x in importance.query),
                   tuple((w, round(float(x), 6)) for w, x in importance.candidate))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseExplanation:
        """Inverse of ``dataclasses.asdict``."""
        return cls(str(data["system"]), int(data["rank"]), str(data["doc_id"]), str(data["method"]),
                   float(data["score"]), tuple((str(w), float(x)) for w, x in data.get("query", ())),
                   tuple((str(w), float(x)) for w, x in data.get("candidate", ())))

    def line(self, k: int = 3) -> str:
        """"bm25 #1 (occlusion, score 12.3): query stop +4.1, depression +6.2; candidate …" (top-k by weight)."""
        def top(pairs):
            order = sorted(pairs, key=lambda p: -p[1])[:k]
            return ", ".join(f"{w} {x:+.3f}" for w, x in order) or "(no words)"

        return (f"{self.system} #{self.rank} ({self.method}, score {self.score:.3f}): query {top(self.query)}; "
                f"candidate {top(self.candidate)}")
