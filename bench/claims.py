"""The claims table that opens BENCHMARKS.md: each paper's headline claim, its number, the number here, the
verdict and the command that reproduces it, rendered from ``bench/claims.json``.

A claim names the paper row it rests on (``row``: its ``where``, ``system`` and ``metric`` in
``bench/paper_rows.json``), or a report value of its own (``here``: ``{"report", "path"}``, with the
paper's value as printed in ``paper_value``), or neither (``not_measured`` says why). The number here and
the command are read from the report, never typed; the verdict is the one the paper's section argues.
A malformed manifest raises :class:`bench.paper_rows.ManifestError`.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.paper_rows import ManifestError, format_value, load_manifest, resolve
from bench.reporting import REPORTS, ROOT, measured_before_build

CLAIMS = ROOT / "bench" / "claims.json"
KEYS = ("paper", "claim", "measure", "verdict", "section")
OPTIONAL = ("row", "here", "paper_value", "not_measured", "command")


def _paper_row(claim: dict, rows: list[dict], where: str) -> dict:
    ref = claim["row"]
    found = [r for r in rows if r["paper"] == claim["paper"] and all(r[k] == ref.get(k) for k in ("where", "system", "metric"))
             and ("here_system" not in ref or r["here_system"] == ref["here_system"])]
    if len(found) != 1:
        raise ManifestError(f"{where}: row {ref} matches {len(found)} paper rows of {claim['paper']} (add here_system)")
    return found[0]


def load_claims(path: Path = CLAIMS) -> list[dict]:
    """The claims, each with ``paper_value``, ``here`` and ``not_measured`` filled from its paper row."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = load_manifest()
    claims = []
    for i, claim in enumerate(data["claims"]):
        where = f"claims.json claim {i} ({claim.get('claim')})"
        missing = [k for k in KEYS if not isinstance(claim.get(k), str) or not claim[k].strip()]
        unknown = [k for k in claim if k not in KEYS + OPTIONAL]
        if missing or unknown:
            raise ManifestError(f"{where}: missing or empty {missing}; unknown {unknown}")
        claim = dict(claim)
        if "row" in claim:
            row = _paper_row(claim, rows, where)
            claim.setdefault("paper_value", row["paper_value"])
            claim["here"] = row["here"]
            if row["here"] is None:
                claim.setdefault("not_measured", row["not_measured"])
        if claim.get("here") is None and not claim.get("not_measured"):
            raise ManifestError(f"{where}: no report backs it, so not_measured must say why")
        claims.append(claim)
    return claims


def _report(name: str, reports: Path) -> dict:
    path = reports / name
    data = json.loads(path.read_text(encoding="utf-8")) if name.endswith(".json") and path.is_file() else {}
    return data if isinstance(data, dict) else {}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def here_cell(claim: dict, reports: Path = REPORTS) -> str:
    """The number here with its measure; a report measured before this build says its commit."""
    if claim.get("here") is None:
        return "not measured"
    value = resolve(claim["here"], reports, claim["claim"])
    if value is None:
        return "not measured"
    commit = _report(claim["here"]["report"], reports).get("commit")
    stale = f" (report of commit {commit}, before this build)" if commit and measured_before_build(commit) else ""
    return f"{claim['measure']} {format_value(value)}{stale}"


def command_cell(claim: dict, reports: Path = REPORTS) -> str:
    """The command that wrote the claim's report (its own ``command`` field), or the manifest's for a claim no
    report backs yet."""
    command = claim.get("command")
    if claim.get("here") is not None:
        command = _report(claim["here"]["report"], reports).get("command") or command
    return f"`{command.removeprefix('.venv/bin/')}`" if command else "—"


def claims_table(path: Path = CLAIMS, reports: Path = REPORTS) -> list[str]:
    """Markdown: one line per claim, papers in manifest order."""
    out = ["| paper | headline claim | paper | here | verdict | reproduce |", "|---|---|---|---|---|---|"]
    for claim in load_claims(path):
        verdict = f"**{claim['verdict']}**" + (f" ({claim['not_measured']})" if claim.get("here") is None else "")
        out.append(f"| [{claim['paper'].removesuffix('.md')}](#{_anchor(claim['section'])}) | {_cell(claim['claim'])} | "
                   f"{_cell(claim.get('paper_value', '—'))} | {_cell(here_cell(claim, reports))} | {_cell(verdict)} | "
                   f"{_cell(command_cell(claim, reports))} |")
    return out


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")
