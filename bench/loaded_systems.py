"""The systems a benchmark measures, loaded one by one: each one that loads, in order; one that cannot (not built,
still building, or refused by the benchmark's own check) is left out, its reason in one line, so a report says
what it did not measure instead of failing."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

__all__ = ["each_loaded"]


def each_loaded(names: Sequence[str], dataset, skipped: dict[str, str], check: Callable[[str], None] | None = None,
                say: Callable[[str], None] | None = None) -> Iterator[tuple[str, object]]:
    """``(name, system)`` for each of ``names`` that loads on ``dataset`` (``core.serving.loader.load``) after
    ``check(name)`` passes; a ``StudioError`` on the way puts its first line under ``skipped[name]`` (and through
    ``say``) and the next name follows. Errors of the caller's own measurements are not caught."""
    from core.errors import StudioError
    from core.serving.loader import load

    for name in names:
        try:
            if check is not None:
                check(name)
            system = load(name, dataset)
        except StudioError as exc:
            skipped[name] = str(exc).splitlines()[0][:200]
            if say is not None:
                say(f"{name}: skipped ({skipped[name]})")
            continue
        yield name, system
