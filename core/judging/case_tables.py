"""Paper-ready case tables: the rankings exactly as shown (``CaseTable``: per system rank, id, text, score,
relevance marks), built from a ``core.analysis.compare.Comparison`` (``case_table``) or read back from a saved
case (``CaseTable.from_dict``), and their exports in the style of Table 4 of densetrans-cai2021.md (query, ground
truth, one block of top-k per system, ground-truth hits marked):

- ``to_markdown`` (markdown characters in texts are backslash-escaped),
- ``to_latex`` (``\\ { } $ & # ^ _ % ~ < > |`` escaped; needs ``booktabs`` and, for ``mark="color"``, ``xcolor``),
- ``to_csv`` (one row per hit; texts that a spreadsheet would run as a formula get a leading apostrophe).

Long questions are cut at ``max_chars`` (``None``: never).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from core.analysis.compare import Comparison
from core.data.cells import csv_text
from core.judging.case_explanations import CaseExplanation
from core.data.text import strip_control


@dataclass(frozen=True)
class CaseHit:
    """One ranked hit as shown: ``qrel`` is the dataset label, ``user_label`` the user's (or None)."""

    rank: int
    doc_id: str
    text: str
    score: float
    qrel: int | None = None
    user_label: int | None = None

    @property
    def relevant(self) -> bool:
        """Ground truth: a positive dataset label, or a user label 2 ("same question") where the dataset has
        none; a user label 1 ("related") is not relevant."""
        if self.qrel is not None:
            return self.qrel > 0
        return (self.user_label or 0) >= 2

    @property
    def mark(self) -> str:
        """What a table shows: ✅ for a positive dataset label or a user label 2 ("same question"), "related"
        for a user label 1 (related is not the same question: never shown as relevant), else nothing."""
        if self.qrel is not None:
            return "✅" if self.qrel > 0 else ""
        return {2: "✅ same (yours)", 1: "related (yours)"}.get(self.user_label or 0, "")


@dataclass(frozen=True)
class CaseColumn:
    """One system's top-k (or its error) and its per-query metrics."""

    system: str
    hits: tuple[CaseHit, ...] = ()
    error: str = ""
    metrics: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class CaseTable:
    """A comparison frozen for saving and exporting."""

    dataset: str
    query: str
    query_id: str | None
    k: int
    columns: tuple[CaseColumn, ...]
    ground_truth: tuple[str, ...] = ()
    baseline: str | None = None
    explanations: tuple[CaseExplanation, ...] = ()  # "why" of rows (core.judging.case_explanations)

    def to_dict(self) -> dict:
        """JSON-ready form (what the case store keeps)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseTable:
        """Inverse of ``to_dict``."""
        cols = tuple(
            CaseColumn(
                system=c["system"],
                hits=tuple(CaseHit(**h) for h in c.get("hits", ())),
                error=c.get("error", ""),
                metrics=tuple((str(m), float(v)) for m, v in c.get("metrics", ())),
            )
            for c in data.get("columns", ())
        )
        return cls(data["dataset"], data["query"], data.get("query_id"), int(data["k"]), cols,
                   tuple(data.get("ground_truth", ())), data.get("baseline"),
                   tuple(CaseExplanation.from_dict(e) for e in data.get("explanations", ())))


def case_table(comparison: Comparison, dataset: str) -> CaseTable:
    """The rankings of a ``Comparison`` as shown on the page."""
    cols = []
    for r in comparison.results:
        hits = tuple(CaseHit(h.rank, h.doc_id, h.text, float(h.score), h.qrel, h.user_label) for h in r.hits)
        cols.append(CaseColumn(r.choice.label, hits, r.error, tuple((m, float(v)) for m, v in r.metrics.items())))
    return CaseTable(dataset, comparison.query, comparison.query_id, comparison.k, tuple(cols),
                     tuple(comparison.known_paraphrases), comparison.baseline)


def _as_table(source: CaseTable | Comparison, dataset: str = "") -> CaseTable:
    return source if isinstance(source, CaseTable) else case_table(source, dataset)


def truncate(text: str, max_chars: int | None) -> str:
    """One line, cut to ``max_chars`` with ``...`` (``None`` or 0: whole text)."""
    text = " ".join(strip_control(text).split())
    if not max_chars or len(text) <= max_chars:
        return text
    return text[: max(1, max_chars - 3)].rstrip() + "..."


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#~$&!])")


def escape_markdown(text: str) -> str:
    """Backslash-escape markdown/HTML characters (``| * _ ` [ ] < > # ~ $ & ! { } \\``) of one line."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(strip_control(text).split()))


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
    "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",
}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))


def escape_latex(text: str) -> str:
    """Escape LaTeX special characters of one line (single pass, so nothing is escaped twice)."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], " ".join(strip_control(text).split()))


def _ground(table: CaseTable) -> list[str]:
    if table.ground_truth:
        return list(table.ground_truth)
    seen: dict[str, str] = {}
    for col in table.columns:
        for h in col.hits:
            if h.relevant:
                seen.setdefault(h.doc_id, h.text)
    return list(seen.values())


def _metrics_line(col: CaseColumn) -> str:
    from core.evaluation import short

    return ", ".join(f"{short(m)} {v:.2f}" for m, v in col.metrics)


def to_markdown(source: CaseTable | Comparison, *, max_chars: int | None = 80, title: str = "",
                dataset: str = "") -> str:
    """A Table-4-style markdown table: query, ground truth, then each system's top-k (hits in the
    ground truth in bold with ✓). Every text is markdown-escaped."""
    t = _as_table(source, dataset)
    lines = []
    if title:
        lines += [f"**{escape_markdown(title)}**", ""]
    caption = f"Top-{t.k} results on {escape_markdown(t.dataset)}"
    if t.query_id:
        caption += f" (query id {escape_markdown(t.query_id)}; the query is removed from its own ranking)"
    lines += [caption + ". Ground-truth hits are in bold and marked ✓.", ""]
    lines += ["| | |", "|---|---|", f"| question | {escape_markdown(truncate(t.query, max_chars))} |"]
    for g in _ground(t) or ["(none known)"]:
        lines.append(f"| ground | {escape_markdown(truncate(g, max_chars))} |")
    for col in t.columns:
        head = f"**{escape_markdown(col.system)}**"
        if col.metrics:
            head += f" ({escape_markdown(_metrics_line(col))})"
        lines.append(f"| {head} | |")
        if col.error:
            lines.append(f"| | error: {escape_markdown(truncate(col.error, 200))} |")
        for h in col.hits:
            text = escape_markdown(truncate(h.text, max_chars))
            lines.append(f"| #{h.rank} | {'**' + text + '** ✓' if h.relevant else text} |")
    if t.explanations:  # the rows explained in Compare's "why": the words that drove each score
        lines += ["", "Why (word importance, top words by weight):", ""]
        lines += [f"- {escape_markdown(e.line())}" for e in t.explanations]
    return "\n".join(lines) + "\n"


def to_latex(source: CaseTable | Comparison, *, max_chars: int | None = 80, title: str = "",
             mark: str = "color", dataset: str = "", label: str = "tab:case-study") -> str:
    """A Table-4-style LaTeX ``table`` (booktabs): ground-truth hits in red (``mark="color"``,
    needs xcolor) or bold (``mark="bold"``). Every text is LaTeX-escaped."""
    if mark not in ("color", "bold"):
        raise ValueError(f"mark must be 'color' or 'bold', got {mark!r}")
    t = _as_table(source, dataset)
    wrap = (lambda s: r"\textcolor{red}{" + s + "}") if mark == "color" else (lambda s: r"\textbf{" + s + "}")
    systems = ", ".join(escape_latex(c.system) for c in t.columns)
    caption = (escape_latex(title) + ". " if title else "") + (
        f"Top-{t.k} ranked results of {systems} on {escape_latex(t.dataset)}. "
        f"The ground-truth question is marked in {'red' if mark == 'color' else 'bold'}.")
    out = [
        "% Case study table: needs \\usepackage{booktabs}" + (" and \\usepackage{xcolor}" if mark == "color" else ""),
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{@{}ll@{}}",
        r"\toprule",
        r"question & " + escape_latex(truncate(t.query, max_chars)) + r" \\",
    ]
    for g in _ground(t) or ["(none known)"]:
        out.append(r"ground & " + escape_latex(truncate(g, max_chars)) + r" \\")
    for col in t.columns:
        out.append(r"\midrule")
        head = r"\textbf{" + escape_latex(col.system) + "}"
        if col.metrics:
            head += " (" + escape_latex(_metrics_line(col)) + ")"
        out.append(r"\multicolumn{2}{@{}l}{" + head + r"} \\")
        if col.error:
            out.append(r" & error: " + escape_latex(truncate(col.error, 200)) + r" \\")
        for h in col.hits:
            text = escape_latex(truncate(h.text, max_chars))
            out.append(rf"\#{h.rank} & " + (wrap(text) if h.relevant else text) + r" \\")
    out += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{" + caption + "}",
        r"\label{" + re.sub(r"[^A-Za-z0-9:._-]", "-", label) + "}",
        r"\end{table}",
    ]
    return "\n".join(out) + "\n"


CSV_FIELDS = ("dataset", "query_id", "query", "system", "rank", "doc_id", "text", "score", "relevant",
              "qrel", "user_label")


def to_csv(source: CaseTable | Comparison, *, max_chars: int | None = None, dataset: str = "") -> str:
    """One row per hit (``CSV_FIELDS``); quoting by the csv module, formulas neutralised."""
    t = _as_table(source, dataset)
    return csv_text([{
        "dataset": t.dataset, "query_id": t.query_id or "", "query": truncate(t.query, max_chars),
        "system": col.system, "rank": h.rank, "doc_id": h.doc_id, "text": truncate(h.text, max_chars),
        "score": f"{h.score:.6g}", "relevant": int(h.relevant), "qrel": "" if h.qrel is None else h.qrel,
        "user_label": "" if h.user_label is None else h.user_label} for col in t.columns for h in col.hits], CSV_FIELDS)


def rows_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Any list of flat dicts as CSV (chart data), formulas neutralised (``core.data.cells``)."""
    return csv_text(rows) if rows else ""
