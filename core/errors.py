"""Errors with messages a researcher can act on (what is wrong, where, and the command that fixes it)."""
from __future__ import annotations

from pathlib import Path


class StudioError(Exception):
    """Base class: every error the UI shows as a message instead of a traceback."""


class DataFormatError(StudioError):
    """A malformed input file: names the file, the line and what is wrong."""

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class QueryError(StudioError):
    """A query that cannot be searched (empty, too long); nothing was run."""


class UnknownNameError(StudioError):
    """An unknown system, dataset, metric or variant name; lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(sorted(known)) or '(none)'}")


class MissingArtifactError(StudioError):
    """A checkpoint or index that is not built (or is corrupt); names the command that builds it."""

    def __init__(self, what: str, command: str, reason: str = "not built yet") -> None:
        self.what, self.command = what, command
        super().__init__(f"{what} is {reason}. Build it with: {command}")
