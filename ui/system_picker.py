"""Every page's system picker: the options grouped by where a system comes from (yours, plugins, built-in), each
group's count in the picker's label and a user's or a plugin's system marked in its option, so a researcher's own
systems are at the top of the list instead of found only by typing. Values stay the systems' names."""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import streamlit as st

GROUPS = ("yours", "plugins", "built-in")  # the list's order: a user's own systems first


def system_group(name: str) -> str | None:
    """``yours`` (added with `core systems add` or on the Models page), ``plugins`` (a `qrs.systems` entry point)
    or ``built-in``, from the registration's origin; None for what is not a system (an imported run)."""
    from core.registry import get_spec

    try:
        origin = get_spec(name.split("@", 1)[0]).origin
    except Exception:  # noqa: BLE001 - not a registered system: ungrouped, listed last
        return None
    return "yours" if origin == "user" else "plugins" if origin.startswith("plugin") else "built-in"


def grouped(names: Sequence[str]) -> list[str]:
    """``names`` ordered by group (``GROUPS``), each group in the given order; what has no group comes last."""
    rank = {g: i for i, g in enumerate(GROUPS)}
    return sorted(names, key=lambda n: rank.get(system_group(n), len(GROUPS)))


def picker_label(label: str, names: Sequence[str]) -> str:
    """The label with each group's count ("Systems · 2 yours · 1 plugins · 9 built-in") when there are several
    groups; the plain label otherwise."""
    counts = Counter(system_group(n) for n in names)
    present = [g for g in GROUPS if counts[g]]
    if len(present) < 2:
        return label
    return label + " · " + " · ".join(f"{counts[g]} {g}" for g in present)


def option_label(name: str) -> str:
    """A built-in system by its name; a user's or a plugin's marked (``my-model · yours``)."""
    group = system_group(name)
    return name if group in (None, "built-in") else f"{name} · {group}"


NOT_BUILT = " — not built"  # how an option that cannot rank yet is marked (picking it shows its build command)


def system_multiselect(label: str, names: Sequence[str], where=st, ready: Collection[str] | None = None,
                       limit: int | None = None, **kwargs) -> list[str]:
    """``st.multiselect`` over ``names``, grouped and counted (``where``: the container, e.g. ``st.sidebar``).
    ``ready``: the names that can rank now; the others are marked "not built" and Streamlit's own "Select all" is
    off (it would pick them: :func:`select_ready` is the page's). ``limit``: at most that many picked."""
    def shown(name: str) -> str:
        return option_label(name) + ("" if ready is None or name in ready else NOT_BUILT)

    if ready is not None or (limit is not None and len(names) > limit):
        kwargs.setdefault("select_all", False)
    if limit is not None:
        kwargs.setdefault("max_selections", limit)
    return where.multiselect(picker_label(label, names), grouped(names), format_func=shown, **kwargs)


def select_ready(key: str, names: Sequence[str], ready: Collection[str], limit: int) -> None:
    """A "select all" that picks only what can rank now, at most ``limit`` (an ``on_click`` of the page's button)."""
    st.session_state[key] = [n for n in grouped(names) if n in ready][:limit]


def not_built(names: Sequence[str], ready: Collection[str]) -> list[str]:
    """The names that cannot rank yet, in the picker's order."""
    return [n for n in grouped(names) if n not in ready]


def system_selectbox(label: str, names: Sequence[str], where=st, **kwargs) -> str | None:
    """``st.selectbox`` over ``names``, grouped and counted; it starts on the page's first name (not on the first
    of the regrouped list) unless the page gives ``index`` or the widget has a value already."""
    options = grouped(names)
    if names and "index" not in kwargs and kwargs.get("key") not in st.session_state:
        kwargs["index"] = options.index(names[0])
    return where.selectbox(picker_label(label, names), options, format_func=option_label, **kwargs)
