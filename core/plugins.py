"""``qrs.systems`` plugins: installed distributions whose entry point is a system module (``REGISTRATION`` or
``REGISTRATIONS`` and ``build`` / ``is_built`` / ``load``), registered like a built-in system and checked the same
way (``core.system_spec.check_registration`` / ``check_provider``).

Read as installed *now*: importlib's path caches are dropped and new ``.pth`` files of the site directories read
before the entry points are listed, so a distribution installed while the app runs (an editable one included)
is found and imports without a restart (``core.user_systems.refresh_if_changed`` compares ``plugin_state``).
A plugin that fails to import or register is one line (with a restart hint when its module is not found), and
the registry answers a request for it by name with that line (``unloaded``, kept by the registry).
"""
from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from dataclasses import replace

from core.system_spec import SystemSpec, check_provider, check_registration

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


def plugin_registrations(target: object, where: str) -> list[SystemSpec]:
    """The specs a plugin's module (or object) registers, once it passed the checks every system passes:
    ``REGISTRATION`` (or ``REGISTRATIONS``; a callable returning one is called) and :class:`SystemProvider`."""
    specs = getattr(target, "REGISTRATIONS", None) or (getattr(target, "REGISTRATION", None),)
    specs = [s() if callable(s) and not isinstance(s, SystemSpec) else s for s in specs]
    specs = [check_registration(where, s) for s in specs]
    check_provider(where, target)
    return specs


def discover_plugins(register: Callable[..., object], problems: list[str],
                     unloaded: MutableMapping[str, str]) -> tuple:
    """Register (``register(spec, provider=...)``: the registry's) every plugin; one line per broken one goes to
    ``problems`` and, under its entry point's name, to ``unloaded``. Returns the ``plugin_state`` read."""
    eps = plugin_entry_points()
    for ep in eps:
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value.split(":")[0]
        try:
            target = ep.load()
            for spec in plugin_registrations(target, ep.value):
                register(replace(spec, origin=f"plugin:{dist}", source=ep.value), provider=target)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is one line, never a crash
            hint = f" ({RESTART_HINT})" if isinstance(exc, ModuleNotFoundError) else ""
            line = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}{hint}"
            problems.append(f"plugin {ep.name} ({dist}, {ep.value}): {line}")
            unloaded[ep.name] = f"{dist} ({ep.value}): {line}"
    return _state(eps)
