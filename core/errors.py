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
        self.what, self.command = what, command  # a command, or the choices (``core.registry.build_command``)
        super().__init__(f"{what} is {reason}. " + (f"Build it with: {command}" if command.startswith("python ")
                                                     else command))


class NotReadyError(StudioError):
    """A normal state, not a failure: a system still building or queued, or one that cannot answer this kind of
    query (a fixed run asked for a typed query). Its message names the system once; pages show it as information."""


class BuildPendingError(MissingArtifactError, NotReadyError):
    """A system not built yet that the running background build has queued or is building: says where it
    stands ("queued (position 3)", "building: step 2/5"), never a command to run."""

    def __init__(self, what: str, note: str) -> None:
        self.what, self.command = what, ""
        StudioError.__init__(self, note)


# Library errors a user's input can cause, mapped to one line (the CLI exits 2 on them; the pages show
# the same line). Anything else is a bug and keeps its traceback.
_LIBRARY_PACKAGES = {"ranx": "ranx", "bm25s": "bm25s"}


def _origin_package(exc: BaseException) -> str | None:
    """The top-level package of the innermost frame that raised ``exc`` (``ranx``, ``bm25s``, ...)."""
    tb = exc.__traceback__
    package = None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        package = name.split(".", 1)[0]
        tb = tb.tb_next
    return package


def describe_error(exc: BaseException) -> str | None:
    """One line for an error the user caused (a ``StudioError`` or a known library error), else None.

    Known library errors: SQLAlchemy and sqlite3 (a broken or unreachable database), JSON decoding,
    and anything raised from inside ranx or bm25s (e.g. ranx's ``max() arg is an empty sequence`` on
    an all-empty run).
    """
    import json
    import sqlite3

    if isinstance(exc, StudioError):
        return str(exc)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    try:
        from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
    except ImportError:  # pragma: no cover - sqlalchemy is a pinned dependency
        SQLAlchemyError = DBAPIError = ArgumentError = ()  # type: ignore[assignment]
    if isinstance(exc, DBAPIError):
        orig = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0][:300]
        return f"database error: {orig}"
    if isinstance(exc, ArgumentError):
        return f"database URL or argument error: {first}"
    if isinstance(exc, SQLAlchemyError):
        return f"database error: {first}"
    if isinstance(exc, sqlite3.Error):
        return f"database error: {first}"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
    package = _origin_package(exc)
    if package in _LIBRARY_PACKAGES and isinstance(exc, (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError)):
        return f"{_LIBRARY_PACKAGES[package]} could not process the input: {type(exc).__name__}: {first}"
    return None
