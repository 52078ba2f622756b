"""Paper rows: every "paper vs here" comparison, rendered from ``bench/paper_rows.json``.

The manifest holds, per row, the paper's value as printed (``paper_value``, with the table row quoted
verbatim in ``paper_quote``), a *reference* to the value here (``{"report": "cnn_trecqa.json", "path":
["eval", "test", "all_queries_zero_if_no_relevant", "map@1000"]}``: a committed report under
``bench/reports`` and a path of dict keys, list indexes or ``{field: value}`` selectors that pick the
one list element, e.g. a JSONL line, whose fields match), the protocol here (scorer, query set,
unanswerable-query convention, tie rule, training data, encoder, build) and ``like_for_like``: ``true``
or ``"differs: ..."`` saying exactly what differs. A value here is never typed into the manifest: a
missing report or key renders "not measured", and ``here: null`` (with ``not_measured`` saying why)
marks a comparison that no report backs.

``paper_rows_table()`` renders the markdown (one table per paper) that ``bench.tables.render`` puts
into BENCHMARKS.md's generated section. A malformed manifest raises :class:`ManifestError`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from bench.reporting import REPORTS, ROOT, build_commit, measured_before_build

MANIFEST = ROOT / "bench" / "paper_rows.json"

ROW_KEYS = ("paper", "where", "system", "here_system", "dataset", "metric", "paper_value", "paper_quote",
            "here", "protocol", "like_for_like")
OPTIONAL_KEYS = ("not_measured", "decided_on_test")  # decided_on_test: the choice made with test numbers in view
PROTOCOL_KEYS = ("scorer", "queries", "unanswerable", "ties", "training_data", "encoder", "build")
NOT_MEASURED = "not measured"
NOT_ON_THIS_BUILD = "not measured on this build"
PRE_PIPELINE = "pre-pipeline"  # the build a protocol names predates the text pipeline (core.data.pipeline)


class ManifestError(ValueError):
    """bench/paper_rows.json is malformed (or a reference in it is ambiguous)."""


def _where(i: int, row: dict) -> str:
    names = " / ".join(str(row.get(k)) for k in ("paper", "where", "system", "metric") if isinstance(row, dict) and row.get(k))
    return f"paper_rows.json row {i}" + (f" ({names})" if names else "")


def _check_path(path, where: str) -> None:
    if not isinstance(path, list) or not path:
        raise ManifestError(f"{where}: here.path must be a non-empty list of keys, indexes or {{field: value}} selectors")
    for step in path:
        if isinstance(step, bool) or not isinstance(step, (str, int, dict)):
            raise ManifestError(f"{where}: here.path step {step!r} is not a key, an index or a selector")
        if isinstance(step, dict) and (not step or any(
                not isinstance(k, str) or isinstance(v, (dict, list)) or v is None for k, v in step.items())):
            raise ManifestError(f"{where}: selector {step!r} must map field names to plain values")


def validate_row(i: int, row) -> None:
    """Raise :class:`ManifestError` naming row ``i`` and what is wrong with it."""
    where = _where(i, row)
    if not isinstance(row, dict):
        raise ManifestError(f"{where}: a row must be an object")
    missing = [k for k in ROW_KEYS if k not in row]
    unknown = [k for k in row if k not in ROW_KEYS + OPTIONAL_KEYS]
    if missing or unknown:
        raise ManifestError(f"{where}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown key(s) {', '.join(unknown)}"] if unknown else [])))
    for key in ("paper", "where", "system", "here_system", "dataset", "metric", "paper_value", "paper_quote"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise ManifestError(f"{where}: {key} must be a non-empty string (paper_value as printed, not a number)")
    if not row["paper"].endswith(".md"):
        raise ManifestError(f"{where}: paper must name a paper file (e.g. cnn-rerank-severyn2015.md)")
    if row["paper_value"] not in row["paper_quote"]:
        raise ManifestError(f"{where}: paper_value {row['paper_value']!r} is not in the quoted table row")
    protocol = row["protocol"]
    if not isinstance(protocol, dict) or sorted(protocol) != sorted(PROTOCOL_KEYS) or any(
            not isinstance(v, str) or not v.strip() for v in protocol.values()):
        raise ManifestError(f"{where}: protocol must give exactly {', '.join(PROTOCOL_KEYS)} as non-empty strings")
    lfl = row["like_for_like"]
    if not (lfl is True or (isinstance(lfl, str) and lfl.startswith("differs: ") and lfl[len("differs: "):].strip())):
        raise ManifestError(f"{where}: like_for_like must be true or 'differs: <what differs>'")
    if "decided_on_test" in row and (not isinstance(row["decided_on_test"], str) or not row["decided_on_test"].strip()):
        raise ManifestError(f"{where}: decided_on_test must name the choice made with test numbers in view")
    here = row["here"]
    if here is None:
        if not isinstance(row.get("not_measured"), str) or not row["not_measured"].strip():
            raise ManifestError(f"{where}: here is null, so not_measured must say why no report backs the row")
        return
    if "not_measured" in row:
        raise ManifestError(f"{where}: not_measured is only for rows whose here is null")
    if not isinstance(here, dict) or sorted(here) != ["path", "report"]:
        raise ManifestError(f"{where}: here must be {{\"report\": ..., \"path\": [...]}} or null")
    report = here["report"]
    if not isinstance(report, str) or "/" in report or "\\" in report or not report.endswith((".json", ".jsonl")):
        raise ManifestError(f"{where}: here.report must be a file name under bench/reports ending in .json or .jsonl")
    _check_path(here["path"], where)


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    """The manifest's rows, validated (raises :class:`ManifestError`)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the paper-rows manifest: {exc}") from exc
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ManifestError(f"{path}: expected an object with a non-empty 'rows' list")
    for i, row in enumerate(rows):
        validate_row(i, row)
    return rows


def _load_report(file: Path):
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"bench/reports/{file.name} is not valid JSON: {exc}") from exc


_MISSING = object()


def _walk(node, path: list, where: str):
    for n, step in enumerate(path):
        if isinstance(step, dict):
            if not isinstance(node, list):
                return _MISSING
            matches = [x for x in node if isinstance(x, dict) and all(k in x and x[k] == v for k, v in step.items())]
            values = [_walk(m, path[n + 1:], where) for m in matches]
            found = [v for v in values if v is not _MISSING]
            if not found:
                return _MISSING
            if any(v != found[0] for v in found[1:]):
                raise ManifestError(f"{where}: selector {step!r} matches {len(matches)} report entries that disagree; "
                                    "add fields to the selector")
            return found[0]
        if isinstance(step, str):
            node = node.get(step, _MISSING) if isinstance(node, dict) else _MISSING
        else:
            node = node[step] if isinstance(node, list) and -len(node) <= step < len(node) else _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def resolve(here: dict | None, reports: Path = REPORTS, where: str = "paper row") -> float | None:
    """The number ``here`` points at, or None when its report or key is missing (= not measured).

    Raises :class:`ManifestError` when the path ends on something that is not a number, or a selector
    matches several entries that disagree."""
    if here is None:
        return None
    file = Path(reports) / here["report"]
    if not file.is_file():
        return None
    value = _walk(_load_report(file), here["path"], where)
    if value is _MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ManifestError(f"{where}: bench/reports/{here['report']} {here['path']} is {value!r}, not a number")
    return value


def stale_reason(row: dict, reports: Path | None = None) -> str | None:
    """Why a row's report does not speak for this build, or None: a report written before the text pipeline
    (the protocol's build says ``pre-pipeline``), by a build whose artifacts folder is gone (``/tmp/...``), or
    at a commit before the default build's (``bench.reporting.measured_before_build``: other models)."""
    reports = REPORTS if reports is None else reports
    build = row["protocol"]["build"]
    if PRE_PIPELINE in build:
        return f"its report {row['here']['report']} was written before the text pipeline; regenerate it to fill this row"
    gone = [w.strip("(),;") for w in build.split() if w.startswith(("/tmp/", "(/tmp/"))]
    if gone and not any(Path(g).exists() for g in gone):
        return f"the artifacts folder {gone[0]} of its report is gone"
    commit = _report_commit(row["here"]["report"], reports)
    if commit and measured_before_build(commit):
        return (f"its report {row['here']['report']} was measured at commit {commit}, before this "
                f"build ({build_commit()}); regenerate it to fill this row")
    return None


def _report_commit(name: str, reports: Path = REPORTS) -> str | None:
    """The ``commit`` a JSON report names (None for a JSON-lines or missing file, or one that names none: such
    rows are judged by their protocol's build only)."""
    path = reports / name
    if path.suffix != ".json" or not path.is_file():
        return None
    data = _load_report(path)
    return data.get("commit") if isinstance(data, dict) else None


def value_here(row: dict, reports: Path = REPORTS, where: str = "paper row") -> str:
    """What a row shows here: the report's value, "not measured (why)" or "not measured on this build (why)"."""
    if row["here"] is None:
        return f"{NOT_MEASURED} ({row['not_measured']})"
    reason = stale_reason(row, reports)
    if reason:
        return f"{NOT_ON_THIS_BUILD} ({reason})"
    return format_value(resolve(row["here"], reports, where))


def format_value(value: float | None) -> str:
    """A value here as the table shows it: 4 decimals below 10, else 1 decimal; None = not measured."""
    if value is None:
        return NOT_MEASURED
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"


def referenced_reports(rows: list[dict] | None = None) -> list[str]:
    """The report files the manifest points at (in first-use order)."""
    rows = load_manifest() if rows is None else rows
    return list(dict.fromkeys(r["here"]["report"] for r in rows if r["here"] is not None))


def check_quotes(papers_dir: Path, rows: list[dict] | None = None) -> list[str]:
    """Rows whose ``paper_quote`` is not a line of the paper file in ``papers_dir`` (empty = all quoted verbatim)."""
    rows = load_manifest() if rows is None else rows
    problems = []
    for i, row in enumerate(rows):
        file = Path(papers_dir) / row["paper"]
        if not file.is_file():
            problems.append(f"{_where(i, row)}: no paper file {file}")
        elif row["paper_quote"] not in file.read_text(encoding="utf-8").splitlines():
            problems.append(f"{_where(i, row)}: the quoted row is not a line of {row['paper']}")
    return problems


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _letter(n: int) -> str:
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(ord("A") + r) + out
    return out


def paper_rows_table(manifest: Path = MANIFEST, reports: Path = REPORTS) -> list[str]:
    """Markdown: one table per paper of ``manifest``, each value here resolved from its report; under each
    table one note per distinct (protocol, like-for-like) setup, lettered, that the rows point to."""
    rows = load_manifest(manifest)
    out = ["### Paper rows: each paper's number beside the number here", "",
           "From `bench/paper_rows.json` (rendered by `bench/paper_rows.py`): the paper's value as printed (the "
           "manifest quotes its table row), the value here read from the named report (**not measured** when the "
           "report or key is missing; **not measured on this build** when the report was written before the text "
           "pipeline, at a commit before this default build's, or its artifacts folder is gone, until it is "
           "regenerated; no number is typed in), and whether the row is like for like; a row whose system rests on "
           "a choice made with test numbers in view says so and which. The lettered "
           "notes under each table say what differs and the protocol here (scorer, queries, unanswerable queries, "
           "ties, training data, encoder, and which build the number comes from).", ""]
    for paper in dict.fromkeys(r["paper"] for r in rows):
        setups: list[tuple[dict, object]] = []
        out += [f"#### {paper}", "",
                "| paper table | paper's system | metric | paper | here | here: system (report) | like for like |",
                "|---|---|---|---|---|---|---|"]
        for i, r in enumerate(rows):
            if r["paper"] != paper:
                continue
            setup = (r["protocol"], r["like_for_like"])
            if setup not in setups:
                setups.append(setup)
            letter = _letter(setups.index(setup))
            here = value_here(r, reports, _where(i, r))
            source = "no report" if r["here"] is None else f"`{r['here']['report']}`"
            lfl = f"yes ({letter})" if r["like_for_like"] is True else f"no: see {letter}"
            if r.get("decided_on_test"):
                lfl += f"; **rests on a choice made on test**: {r['decided_on_test']}"
            out.append(f"| {_cell(r['where'])} | {_cell(r['system'])} | {_cell(r['metric'])} | {_cell(r['paper_value'])} | "
                       f"{_cell(here)} | {_cell(r['here_system'])} ({source}) | {lfl} |")
        out.append("")
        for n, (p, lfl) in enumerate(setups):
            what = "like for like" if lfl is True else lfl.replace("differs: ", "differs: ", 1)
            out.append(f"- **{_letter(n)}** {what}. Protocol here: scorer {p['scorer']}; queries: {p['queries']}; "
                       f"unanswerable queries: {p['unanswerable']}; ties: {p['ties']}; training data: "
                       f"{p['training_data']}; encoder: {p['encoder']}; build: {p['build']}.")
        out.append("")
    return out
