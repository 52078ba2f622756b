"""Case studies: the Compare page's state as URL parameters, paper-ready tables, disagreement picks.

- ``CompareState``: everything that defines a comparison (dataset, query or dataset query id,
  first-stage systems, rerankers + their first stage and depth, k, baseline, index/tree knobs).
  ``to_params()`` gives the short ``st.query_params`` form (defaults left out);
  ``from_params(params, options)`` reads it back and never raises: an unknown or invalid value
  falls back to its default and adds a human-readable note.
- ``CaseTable``: the rankings exactly as shown (per system: rank, id, text, score, relevance marks),
  built from a ``core.analysis.compare.Comparison`` (``case_table``) or read back from a saved case
  (``CaseTable.from_dict``).
- Exports in the style of Table 4 of densetrans-cai2021.md (query, ground truth, one block of
  top-k per system, ground-truth hits marked): ``to_markdown`` (markdown characters in texts are
  backslash-escaped), ``to_latex`` (``\\ { } $ & # ^ _ % ~ < > |`` escaped; needs ``booktabs`` and,
  for ``mark="color"``, ``xcolor``), ``to_csv`` (one row per hit; texts that a spreadsheet would run
  as a formula get a leading apostrophe). Long questions are cut at ``max_chars`` (``None``: never).
- ``changes``: what moved between a saved table and today's models (entered, left, rank moves, RBO).
- ``disagreements``: the queries on which two runs differ most, by per-query metric delta
  (``core.evaluation.per_query``, ranx).
- ``figure_image``: PNG/SVG of a plotly figure via plotly's own export (kaleido >= 1, which drives a
  locally installed Chrome); ``None`` plus the reason when that is not possible (offline, no Chrome),
  in which case the page offers the chart's data as CSV and a self-contained HTML file instead.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from core.analysis.compare import Comparison, SystemChoice, rank_biased_overlap
from core.judging.case_explanations import CaseExplanation
from core.evaluation import check_metrics, per_query
from core.data.text import strip_control
from core.errors import StudioError
from core.registry import SystemSpec, default_first_stage, get_spec, recipe

INDEXES = ("auto", "flat", "ivfpq", "ivf", "hnsw")  # "auto" = each system's serving default (exact below 1M vectors)
TREE_BRANCHING = (5, 8, 10)
NONE = "-"  # URL value of an explicitly empty system list
_RANGES: dict[str, tuple[int, int, int]] = {  # field -> (min, max, step), the page's slider bounds
    "depth": (5, 100, 5),
    "k": (1, 50, 1),
    "nprobe": (1, 128, 1),
    "ef_search": (8, 512, 1),
    "beam": (1, 200, 1),
}
_PARAM_NAMES = {  # state field -> URL parameter
    "dataset": "dataset", "query": "q", "query_id": "qid", "systems": "systems", "rerankers": "rerankers",
    "first_stage": "first_stage", "depth": "depth", "k": "k", "baseline": "baseline", "index": "index",
    "nprobe": "nprobe", "ef_search": "ef", "beam": "beam", "tree_k": "tree_k",
}
MAX_URL_QUERY_CHARS = 2000


def _dense_here(name: str) -> bool:
    """A dense first stage built on this dataset (``densetrans`` or a recipe such as ``densetrans@paper-objective``;
    not a model trained elsewhere): the index knobs apply to it."""
    system, _, variant = name.partition("@")
    spec = _spec(system)
    return spec is not None and spec.ann_indexable and (not variant or recipe(name) is not None
                                                         and name.count("@") == 1)


def _knobs(name: str) -> tuple[str, ...]:
    """The serving knobs of ``name`` as typed (a model trained elsewhere, ``SYSTEM@X``, takes none)."""
    spec = _spec(name) if "@" not in name else None
    return spec.knobs if spec is not None else ()


def _spec(system: str) -> SystemSpec | None:
    """The registration of ``system`` (None for a name the registry does not know)."""
    try:
        return get_spec(system)
    except StudioError:
        return None


# ----------------------------------------------------------------------------- state <-> URL
@dataclass(frozen=True)
class StateOptions:
    """What a state may hold for the current dataset (valid names, known query ids)."""

    dataset: str
    datasets: tuple[str, ...]
    retrievers: tuple[str, ...]
    rerankers: tuple[str, ...]
    query_ids: frozenset[str] = frozenset()

    @classmethod
    def for_dataset(cls, dataset: Any, datasets: Iterable[str]) -> StateOptions:
        """Options for a loaded ``core.data.datasets.Dataset`` (systems that support it, its query ids)."""
        from core.transfer import system_choices  # SYSTEM@TRAINED_ON models (trained on another dataset) included

        return cls(
            dataset=dataset.name,
            datasets=tuple(dict.fromkeys([*datasets, dataset.name])),
            retrievers=tuple(system_choices(dataset, "retriever")),
            rerankers=tuple(system_choices(dataset, "reranker")),
            query_ids=frozenset(dataset.queries),
        )


@dataclass(frozen=True)
class CompareState:
    """One comparison as the Compare page defines it (defaults = the page's defaults)."""

    dataset: str
    query: str = ""
    query_id: str | None = None
    systems: tuple[str, ...] = (default_first_stage(),)
    rerankers: tuple[str, ...] = ()
    first_stage: str = default_first_stage()
    depth: int = 20
    k: int = 10
    baseline: str | None = None
    index: str = "auto"  # the systems' serving default, what the evaluation measured
    nprobe: int = 10
    ef_search: int = 64
    beam: int | None = None  # None: the built tree's own beam and K (core.serving.loader.serving_defaults)
    tree_k: int | None = None

    def choices(self) -> list[SystemChoice]:
        """The ``SystemChoice`` list this state runs (knobs applied where they matter)."""
        dense: tuple[tuple[str, object], ...] = () if self.index == "auto" else (("index", self.index),)
        if self.index.startswith("ivf"):
            dense += (("nprobe", self.nprobe),)
        if self.index == "hnsw":
            dense += (("efSearch", self.ef_search),)
        out = []
        for name in self.systems:
            opts: tuple[tuple[str, object], ...] = dense if _dense_here(name) else ()
            if "beam" in _knobs(name):  # the tree's beam and K
                opts = tuple((key, value) for key, value in (("beam", self.beam), ("K", self.tree_k)) if value is not None)
            out.append(SystemChoice(name, options=opts))
        out += [SystemChoice(name, first_stage=self.first_stage, depth=self.depth) for name in self.rerankers]
        return out

    def labels(self) -> list[str]:
        """Column labels (what ``baseline`` names)."""
        return [c.label for c in self.choices()]

    def to_params(self) -> dict[str, str]:
        """URL parameters: the dataset always, the query as ``qid`` or ``q``, other fields when not default."""
        default = CompareState(self.dataset)
        out = {"dataset": self.dataset}
        if self.query_id:
            out["qid"] = self.query_id
        elif self.query:
            out["q"] = self.query
        for f in fields(self):
            if f.name in ("dataset", "query", "query_id"):
                continue
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            if isinstance(value, tuple):
                out[_PARAM_NAMES[f.name]] = ",".join(value) if value else NONE
            elif value is None:
                out[_PARAM_NAMES[f.name]] = NONE
            else:
                out[_PARAM_NAMES[f.name]] = str(value)
        return out

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], options: StateOptions, display_query: Callable[[str], str] | None = None
    ) -> tuple[CompareState, list[str]]:
        """Read URL parameters; every invalid value falls back to its default with a note.

        ``display_query(qid) -> str`` gives the text of a dataset query (default: the id's text is
        left empty and the caller fills it in).
        """
        notes: list[str] = []
        get = _getter(params)
        default = cls(options.dataset)
        values: dict[str, Any] = {"dataset": options.dataset}
        asked = get("dataset")
        if asked is not None and asked != options.dataset:
            notes.append(f"dataset {_show(asked)} is not available; showing {options.dataset}")
        known = {v for v in _PARAM_NAMES.values()}
        for key in params:
            if key not in known:
                notes.append(f"unknown link parameter {_show(key)} ignored")

        qid, q = get("qid"), get("q")
        if qid is not None and (asked is None or asked == options.dataset):
            if qid in options.query_ids:
                values["query_id"] = qid
                values["query"] = display_query(qid) if display_query else ""
            else:
                notes.append(f"no query with id {_show(qid)} in {options.dataset}")
        elif qid is not None:
            notes.append(f"query id {_show(qid)} belongs to another dataset; ignored")
        if "query_id" not in values and q is not None:
            text = " ".join(strip_control(q).split())
            if len(text) > MAX_URL_QUERY_CHARS:
                notes.append(f"the query in the link has {len(text):,} characters (limit {MAX_URL_QUERY_CHARS:,}); ignored")
            else:
                values["query"] = text

        for name, allowed, kind in (("systems", options.retrievers, "first-stage system"),
                                    ("rerankers", options.rerankers, "reranker")):
            raw = get(_PARAM_NAMES[name])
            if raw is None:
                values[name] = tuple(s for s in getattr(default, name) if s in allowed)
                continue
            names = [] if raw.strip() == NONE else [s.strip() for s in raw.split(",") if s.strip()]
            bad = [s for s in names if s not in allowed]
            if bad:
                notes.append(f"unknown {kind}(s) {', '.join(_show(b) for b in bad)} for {options.dataset} dropped")
            values[name] = tuple(dict.fromkeys(s for s in names if s in allowed))

        first = get("first_stage")
        if first is not None:
            if first in options.retrievers:
                values["first_stage"] = first
            else:
                notes.append(f"first stage {_show(first)} is not a retriever for {options.dataset}; using "
                             f"{default.first_stage if default.first_stage in options.retrievers else 'the first one'}")
        if values.get("first_stage", default.first_stage) not in options.retrievers and options.retrievers:
            values["first_stage"] = options.retrievers[0]

        for name, (lo, hi, step) in _RANGES.items():
            raw = get(_PARAM_NAMES[name])
            if raw is None:
                continue
            try:
                number = int(raw)
            except ValueError:
                number = None
            if number is None or not lo <= number <= hi or (number - lo) % step:
                notes.append(f"{_PARAM_NAMES[name]}={_show(raw)} is not an integer from {lo} to {hi}"
                             f"{f' in steps of {step}' if step > 1 else ''}; using {_default_text(getattr(default, name))}")
            else:
                values[name] = number
        raw = get("index")
        if raw is not None:
            if raw in INDEXES:
                values["index"] = raw
            else:
                notes.append(f"index={_show(raw)} is not one of {', '.join(INDEXES)}; using {default.index}")
        raw = get("tree_k")
        if raw is not None:
            if raw.isascii() and raw.isdigit() and int(raw) in TREE_BRANCHING:
                values["tree_k"] = int(raw)
            else:
                notes.append(f"tree_k={_show(raw)} is not one of {', '.join(map(str, TREE_BRANCHING))}; "
                             f"using {_default_text(default.tree_k)}")

        state = cls(**values)
        raw = get("baseline")
        if raw is not None and raw != NONE:
            if raw in state.labels():
                state = replace(state, baseline=raw)
            else:
                notes.append(f"baseline {_show(raw)} is not one of the chosen systems; no baseline")
        return state, notes


def _default_text(value: object) -> str:
    return "the system's serving default" if value is None else str(value)


def _getter(params: Mapping[str, Any]):
    def get(key: str) -> str | None:
        if key not in params:
            return None
        value = params[key]
        if isinstance(value, (list, tuple)):
            value = value[-1] if value else ""
        return str(value)

    return get


def _show(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def resolve_dataset(params: Mapping[str, Any], known: Iterable[str], current: str) -> str:
    """The dataset a link asks for if it is known, else ``current`` (``from_params`` adds the note)."""
    asked = _getter(params)("dataset")
    return asked if asked is not None and asked in set(known) else current


# ----------------------------------------------------------------------------- tables
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


def _cell(value: Any) -> Any:
    """Neutralise spreadsheet formulas in text cells (OWASP CSV injection): prefix ``'``."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def to_csv(source: CaseTable | Comparison, *, max_chars: int | None = None, dataset: str = "") -> str:
    """One row per hit (``CSV_FIELDS``); quoting by the csv module, formulas neutralised."""
    t = _as_table(source, dataset)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for col in t.columns:
        for h in col.hits:
            writer.writerow({k: _cell(v) for k, v in {
                "dataset": t.dataset, "query_id": t.query_id or "", "query": truncate(t.query, max_chars),
                "system": col.system, "rank": h.rank, "doc_id": h.doc_id, "text": truncate(h.text, max_chars),
                "score": f"{h.score:.6g}", "relevant": int(h.relevant),
                "qrel": "" if h.qrel is None else h.qrel,
                "user_label": "" if h.user_label is None else h.user_label}.items()})
    return buf.getvalue()


def rows_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Any list of flat dicts as CSV (chart data), formulas neutralised."""
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


# ----------------------------------------------------------------------------- saved vs today
@dataclass(frozen=True)
class ColumnChange:
    """How one system's top-k changed between a saved table and a re-run."""

    system: str
    rbo: float | None  # None: the system is missing on one side (or failed)
    entered: tuple[str, ...] = ()  # doc ids new in today's top-k
    left: tuple[str, ...] = ()  # doc ids gone from today's top-k
    moves: tuple[tuple[str, int, int], ...] = ()  # (doc id, saved rank, today's rank) where they differ

    @property
    def unchanged(self) -> bool:
        return self.rbo is not None and not self.entered and not self.left and not self.moves


def changes(saved: CaseTable, today: CaseTable) -> list[ColumnChange]:
    """Per system of the saved table: RBO, entered/left ids and rank moves against today's run."""
    now = {c.system: c for c in today.columns}
    out = []
    for col in saved.columns:
        other = now.get(col.system)
        if other is None or other.error or col.error:
            out.append(ColumnChange(col.system, None))
            continue
        a, b = [h.doc_id for h in col.hits], [h.doc_id for h in other.hits]
        rank_b = {d: i + 1 for i, d in enumerate(b)}
        out.append(ColumnChange(
            col.system,
            rank_biased_overlap(a, b),
            tuple(d for d in b if d not in set(a)),
            tuple(d for d in a if d not in rank_b),
            tuple((d, i + 1, rank_b[d]) for i, d in enumerate(a) if d in rank_b and rank_b[d] != i + 1),
        ))
    return out


def change_marks(saved: CaseTable, today: CaseTable, system: str) -> dict[str, str]:
    """doc id -> ``new`` / ``↑n`` / ``↓n`` / ``=`` of today's hits against the saved column."""
    old = next((c for c in saved.columns if c.system == system), None)
    new = next((c for c in today.columns if c.system == system), None)
    if old is None or new is None:
        return {}
    rank = {h.doc_id: h.rank for h in old.hits}
    out = {}
    for h in new.hits:
        if h.doc_id not in rank:
            out[h.doc_id] = "new"
        else:
            delta = rank[h.doc_id] - h.rank
            out[h.doc_id] = "=" if delta == 0 else (f"↑{delta}" if delta > 0 else f"↓{-delta}")
    return out


# ----------------------------------------------------------------------------- disagreements
@dataclass(frozen=True)
class QueryDelta:
    """Per-query metric of two systems and their difference (``a - b``)."""

    query_id: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.a - self.b


def disagreements(qrels: Mapping[str, Mapping[str, int]], run_a: Any, run_b: Any, metric: str = "ndcg@10",
                  top: int = 10) -> list[QueryDelta]:
    """The ``top`` queries with the largest ``|metric(a) - metric(b)|`` (ties: query id order).

    Only queries with a relevant item are considered; a query one run misses scores 0 (ranx).
    """
    (metric,) = check_metrics([metric])
    qrels = {q: dict(v) for q, v in qrels.items() if any(label > 0 for label in v.values())}
    if not qrels or top <= 0:
        return []
    a = per_query(qrels, run_a, metric)
    b = per_query(qrels, run_b, metric)
    rows = [QueryDelta(q, a.get(q, 0.0), b.get(q, 0.0)) for q in qrels]
    rows.sort(key=lambda r: (-abs(r.delta), r.query_id))
    return rows[:top]


# ----------------------------------------------------------------------------- chart export
@dataclass(frozen=True)
class ImageExport:
    """Bytes of an exported figure, or why there are none."""

    data: bytes | None
    reason: str = ""
    mime: str = field(default="image/png")


def figure_image(figure: Any, fmt: str = "png") -> ImageExport:
    """PNG/SVG via plotly's ``to_image`` (kaleido >= 1 plus a local Chrome); never raises."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"format must be png or svg, got {fmt!r}")
    mime = "image/png" if fmt == "png" else "image/svg+xml"
    try:
        from plotly.io._kaleido import kaleido_available
    except ImportError:  # pragma: no cover - plotly layout changed
        kaleido_available = None
    if kaleido_available is not None and not kaleido_available():
        return ImageExport(None, "kaleido (>= 1) is not installed; plotly cannot write PNG/SVG here. "
                                 "Use the camera icon of the chart, the HTML file, or the chart data (CSV).", mime)
    try:
        return ImageExport(figure.to_image(format=fmt), "", mime)
    except Exception as exc:  # kaleido without Chrome (it would download one: impossible offline)
        return ImageExport(None, f"plotly image export failed ({type(exc).__name__}: {str(exc)[:200]}); "
                                 "use the chart data (CSV) or the HTML file", mime)


def figure_html(figure: Any) -> str:
    """A self-contained interactive HTML file of the figure (plotly.js inlined: works offline; its
    camera button saves a PNG in the browser)."""
    return figure.to_html(include_plotlyjs=True, full_html=True)
