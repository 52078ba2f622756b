"""Every page's system picker: the options grouped by where a system comes from (yours, plugins, built-in), each
group's count in the picker's label and a user's or a plugin's system marked in its option, so a researcher's own
systems are at the top of the list instead of found only by typing. Values stay the systems' names."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

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


def system_multiselect(label: str, names: Sequence[str], where=st, **kwargs) -> list[str]:
    """``st.multiselect`` over ``names``, grouped and counted (``where``: the container, e.g. ``st.sidebar``)."""
    return where.multiselect(picker_label(label, names), grouped(names), format_func=option_label, **kwargs)


def system_selectbox(label: str, names: Sequence[str], where=st, **kwargs) -> str | None:
    """``st.selectbox`` over ``names``, grouped and counted; it starts on the page's first name (not on the first
    of the regrouped list) unless the page gives ``index`` or the widget has a value already."""
    options = grouped(names)
    if names and "index" not in kwargs and kwargs.get("key") not in st.session_state:
        kwargs["index"] = options.index(names[0])
    return where.selectbox(picker_label(label, names), options, format_func=option_label, **kwargs)
