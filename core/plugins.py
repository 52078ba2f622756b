"""``qrs.systems`` plugins: installed distributions whose entry point is a system module (``REGISTRATION`` or
``REGISTRATIONS`` and ``build`` / ``is_built`` / ``load``), registered like a built-in system.

Read as installed *now*: importlib's path caches are dropped and new ``.pth`` files of the site directories read
before the entry points are listed, so a distribution installed while the app runs (an editable one included)
is found and imports without a restart (``core.user_systems.refresh_if_changed`` compares ``plugin_state``).
A plugin that fails to import or register is one line (with a restart hint when its module is not found), and
the registry answers a request for it by name with that line (``core.registry.note_unloaded``).
"""
from __future__ import annotations

import os
from dataclasses import replace

ENTRY_POINT_GROUP = "qrs.systems"
RESTART_HINT = "if it was installed while the app runs and still does not import, restart the app"


def plugin_entry_points() -> list:
    """The ``qrs.systems`` entry points as installed now (path caches dropped, new site ``.pth`` files read)."""
    import importlib
    import site
    from importlib.metadata import entry_points

    importlib.invalidate_caches()
    dirs = [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []
    for folder in dirs:
        if os.path.isdir(folder):
            site.addsitedir(folder)  # adds only paths not on sys.path yet (an editable install's .pth)
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value))


def _state(eps: list) -> tuple:
    return tuple((ep.name, ep.value, getattr(getattr(ep, "dist", None), "name", ""),
                  getattr(getattr(ep, "dist", None), "version", "")) for ep in eps)


def plugin_state() -> tuple:
    """What is installed in the plugin group now (names, targets, distributions and versions)."""
    return _state(plugin_entry_points())


def discover_plugins(problems: list[str]) -> tuple:
    """Register every plugin; one line per broken one goes to ``problems``. Returns the ``plugin_state`` read."""
    from core.registry import SystemSpec, note_unloaded, register

    eps = plugin_entry_points()
    for ep in eps:
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value.split(":")[0]
        try:
            target = ep.load()
            specs = getattr(target, "REGISTRATIONS", None) or (getattr(target, "REGISTRATION", None),)
            specs = [s() if callable(s) and not isinstance(s, SystemSpec) else s for s in specs]
            if not specs or not all(isinstance(s, SystemSpec) for s in specs):
                raise TypeError("it provides no REGISTRATION (a core.registry.SystemSpec)")
            missing = [f for f in ("build", "is_built", "load") if not callable(getattr(target, f, None))]
            if missing:
                raise TypeError(f"it has no {', '.join(missing)}")
            for spec in specs:
                register(replace(spec, origin=f"plugin:{dist}", source=ep.value), provider=target)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is one line, never a crash
            hint = f" ({RESTART_HINT})" if isinstance(exc, ModuleNotFoundError) else ""
            line = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}{hint}"
            problems.append(f"plugin {ep.name} ({dist}, {ep.value}): {line}")
            note_unloaded(ep.name, f"{dist} ({ep.value}): {line}")
    return _state(eps)
