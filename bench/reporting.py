"""What every bench report carries and how it is written: the commit of the code tree, one JSON file."""
from __future__ import annotations

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
