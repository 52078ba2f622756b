"""What every bench report carries and how it is written: the commit of the code tree, one JSON file."""
from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "bench" / "reports"


def head_commit(short: bool = True) -> str:
    """The commit the repository is at (``git rev-parse [--short] HEAD``)."""
    args = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True).stdout.strip()


def write_report(path: str | Path, report: dict) -> Path:
    """Write ``report`` as indented JSON (trailing newline) and say where."""
    path = Path(path)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


def build_commit() -> str | None:
    """The commit of the default build the generated tables describe (``default_build.json``)."""
    path = REPORTS / "default_build.json"
    r = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return str(r["commit"]).split()[0].rstrip("+") if r and r.get("commit") else None


def measured_before_build(commit: str | None) -> bool:
    """True when a row measured at ``commit`` predates the default build (a strict ancestor of its commit in
    git history): its numbers describe models this build replaced, so the row reads "not measured on this
    build". A row without a commit counts as older."""
    build = build_commit()
    if build is None:
        return False
    if not commit:
        return True
    commit = str(commit).split()[0].rstrip("+")
    if commit == build:
        return False
    return _is_ancestor(commit, build)


@functools.lru_cache(maxsize=None)
def _is_ancestor(commit: str, build: str) -> bool:
    """git merge-base --is-ancestor, once per pair (each row is asked twice: its table line and its note)."""
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", commit, build], cwd=ROOT, capture_output=True)
    return ancestor.returncode == 0
