"""The Compare page's state as URL parameters (``CompareState``): everything that defines a comparison (dataset,
query or dataset query id, first-stage systems, rerankers + their first stage and depth, k, baseline, index/tree
knobs). ``to_params()`` gives the short ``st.query_params`` form (defaults left out); ``from_params(params,
options)`` reads it back and never raises: an unknown or invalid value falls back to its default and adds a
human-readable note. A saved case study (``core.judging.casestudy_store``) keeps this state.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from core.analysis.compare import SystemChoice
from core.data.text import strip_control
from core.errors import StudioError
from core.registry import SystemSpec, default_first_stage, get_spec, recipe

INDEXES = ("auto", "flat", "ivfpq", "ivf", "hnsw")  # "auto" = each system's serving default (exact below 1M vectors)
TREE_BRANCHING = (5, 8, 10)
NONE = "-"  # URL value of an explicitly empty system list
_RANGES: dict[str, tuple[int, int, int]] = {  # field -> (min, max, step), the page's slider bounds
    "depth": (5, 100, 5),
    "k": (1, 50, 1),
    "nprobe": (1, 128, 1),
    "ef_search": (8, 512, 1),
    "beam": (1, 200, 1),
}
_PARAM_NAMES = {  # state field -> URL parameter
    "dataset": "dataset", "query": "q", "query_id": "qid", "systems": "systems", "rerankers": "rerankers",
    "first_stage": "first_stage", "depth": "depth", "k": "k", "baseline": "baseline", "index": "index",
    "nprobe": "nprobe", "ef_search": "ef", "beam": "beam", "tree_k": "tree_k",
}
MAX_URL_QUERY_CHARS = 2000


def _dense_here(name: str) -> bool:
    """A dense first stage built on this dataset (``densetrans`` or a recipe such as ``densetrans@paper-objective``;
    not a model trained elsewhere): the index knobs apply to it."""
    system, _, variant = name.partition("@")
    spec = _spec(system)
    return spec is not None and spec.ann_indexable and (not variant or recipe(name) is not None
                                                         and name.count("@") == 1)


def _knobs(name: str) -> tuple[str, ...]:
    """The serving knobs of ``name`` as typed (a model trained elsewhere, ``SYSTEM@X``, takes none)."""
    spec = _spec(name) if "@" not in name else None
    return spec.knobs if spec is not None else ()


def _spec(system: str) -> SystemSpec | None:
    """The registration of ``system`` (None for a name the registry does not know)."""
    try:
        return get_spec(system)
    except StudioError:
        return None


# ----------------------------------------------------------------------------- state <-> URL
@dataclass(frozen=True)
class StateOptions:
    """What a state may hold for the current dataset (valid names, known query ids)."""

    dataset: str
    datasets: tuple[str, ...]
    retrievers: tuple[str, ...]
    rerankers: tuple[str, ...]
    query_ids: frozenset[str] = frozenset()

    @classmethod
    def for_dataset(cls, dataset: Any, datasets: Iterable[str]) -> StateOptions:
        """Options for a loaded ``core.data.datasets.Dataset`` (systems that support it, its query ids)."""
        from core.transfer import system_choices  # SYSTEM@TRAINED_ON models (trained on another dataset) included

        return cls(
            dataset=dataset.name,
            datasets=tuple(dict.fromkeys([*datasets, dataset.name])),
            retrievers=tuple(system_choices(dataset, "retriever")),
            rerankers=tuple(system_choices(dataset, "reranker")),
            query_ids=frozenset(dataset.queries),
        )


@dataclass(frozen=True)
class CompareState:
    """One comparison as the Compare page defines it (defaults = the page's defaults)."""

    dataset: str
    query: str = ""
    query_id: str | None = None
    systems: tuple[str, ...] = (default_first_stage(),)
    rerankers: tuple[str, ...] = ()
    first_stage: str = default_first_stage()
    depth: int = 20
    k: int = 10
    baseline: str | None = None
    index: str = "auto"  # the systems' serving default, what the evaluation measured
    nprobe: int = 10
    ef_search: int = 64
    beam: int | None = None  # None: the built tree's own beam and K (core.serving.loader.serving_defaults)
    tree_k: int | None = None

    def choices(self) -> list[SystemChoice]:
        """The ``SystemChoice`` list this state runs (knobs applied where they matter)."""
        dense: tuple[tuple[str, object], ...] = () if self.index == "auto" else (("index", self.index),)
        if self.index.startswith("ivf"):
            dense += (("nprobe", self.nprobe),)
        if self.index == "hnsw":
            dense += (("efSearch", self.ef_search),)
        out = []
        for name in self.systems:
            opts: tuple[tuple[str, object], ...] = dense if _dense_here(name) else ()
            if "beam" in _knobs(name):  # the tree's beam and K
                opts = tuple((key, value) for key, value in (("beam", self.beam), ("K", self.tree_k)) if value is not None)
            out.append(SystemChoice(name, options=opts))
        out += [SystemChoice(name, first_stage=self.first_stage, depth=self.depth) for name in self.rerankers]
        return out

    def labels(self) -> list[str]:
        """Column labels (what ``baseline`` names)."""
        return [c.label for c in self.choices()]

    def to_params(self) -> dict[str, str]:
        """URL parameters: the dataset always, the query as ``qid`` or ``q``, other fields when not default."""
        default = CompareState(self.dataset)
        out = {"dataset": self.dataset}
        if self.query_id:
            out["qid"] = self.query_id
        elif self.query:
            out["q"] = self.query
        for f in fields(self):
            if f.name in ("dataset", "query", "query_id"):
                continue
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            if isinstance(value, tuple):
                out[_PARAM_NAMES[f.name]] = ",".join(value) if value else NONE
            elif value is None:
                out[_PARAM_NAMES[f.name]] = NONE
            else:
                out[_PARAM_NAMES[f.name]] = str(value)
        return out

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], options: StateOptions, display_query: Callable[[str], str] | None = None
    ) -> tuple[CompareState, list[str]]:
        """Read URL parameters; every invalid value falls back to its default with a note.

        ``display_query(qid) -> str`` gives the text of a dataset query (default: the id's text is
        left empty and the caller fills it in).
        """
        notes: list[str] = []
        get = _getter(params)
        default = cls(options.dataset)
        values: dict[str, Any] = {"dataset": options.dataset}
        asked = get("dataset")
        if asked is not None and asked != options.dataset:
            notes.append(f"dataset {_show(asked)} is not available; showing {options.dataset}")
        known = {v for v in _PARAM_NAMES.values()}
        for key in params:
            if key not in known:
                notes.append(f"unknown link parameter {_show(key)} ignored")

        qid, q = get("qid"), get("q")
        if qid is not None and (asked is None or asked == options.dataset):
            if qid in options.query_ids:
                values["query_id"] = qid
                values["query"] = display_query(qid) if display_query else ""
            else:
                notes.append(f"no query with id {_show(qid)} in {options.dataset}")
        elif qid is not None:
            notes.append(f"query id {_show(qid)} belongs to another dataset; ignored")
        if "query_id" not in values and q is not None:
            text = " ".join(strip_control(q).split())
            if len(text) > MAX_URL_QUERY_CHARS:
                notes.append(f"the query in the link has {len(text):,} characters (limit {MAX_URL_QUERY_CHARS:,}); ignored")
            else:
                values["query"] = text

        for name, allowed, kind in (("systems", options.retrievers, "first-stage system"),
                                    ("rerankers", options.rerankers, "reranker")):
            raw = get(_PARAM_NAMES[name])
            if raw is None:
                values[name] = tuple(s for s in getattr(default, name) if s in allowed)
                continue
            names = [] if raw.strip() == NONE else [s.strip() for s in raw.split(",") if s.strip()]
            bad = [s for s in names if s not in allowed]
            if bad:
                notes.append(f"unknown {kind}(s) {', '.join(_show(b) for b in bad)} for {options.dataset} dropped")
            values[name] = tuple(dict.fromkeys(s for s in names if s in allowed))

        first = get("first_stage")
        if first is not None:
            if first in options.retrievers:
                values["first_stage"] = first
            else:
                notes.append(f"first stage {_show(first)} is not a retriever for {options.dataset}; using "
                             f"{default.first_stage if default.first_stage in options.retrievers else 'the first one'}")
        if values.get("first_stage", default.first_stage) not in options.retrievers and options.retrievers:
            values["first_stage"] = options.retrievers[0]

        for name, (lo, hi, step) in _RANGES.items():
            raw = get(_PARAM_NAMES[name])
            if raw is None:
                continue
            try:
                number = int(raw)
            except ValueError:
                number = None
            if number is None or not lo <= number <= hi or (number - lo) % step:
                notes.append(f"{_PARAM_NAMES[name]}={_show(raw)} is not an integer from {lo} to {hi}"
                             f"{f' in steps of {step}' if step > 1 else ''}; using {_default_text(getattr(default, name))}")
            else:
                values[name] = number
        raw = get("index")
        if raw is not None:
            if raw in INDEXES:
                values["index"] = raw
            else:
                notes.append(f"index={_show(raw)} is not one of {', '.join(INDEXES)}; using {default.index}")
        raw = get("tree_k")
        if raw is not None:
            if raw.isascii() and raw.isdigit() and int(raw) in TREE_BRANCHING:
                values["tree_k"] = int(raw)
            else:
                notes.append(f"tree_k={_show(raw)} is not one of {', '.join(map(str, TREE_BRANCHING))}; "
                             f"using {_default_text(default.tree_k)}")

        state = cls(**values)
        raw = get("baseline")
        if raw is not None and raw != NONE:
            if raw in state.labels():
                state = replace(state, baseline=raw)
            else:
                notes.append(f"baseline {_show(raw)} is not one of the chosen systems; no baseline")
        return state, notes


def _default_text(value: object) -> str:
    return "the system's serving default" if value is None else str(value)


def _getter(params: Mapping[str, Any]):
    def get(key: str) -> str | None:
        if key not in params:
            return None
        value = params[key]
        if isinstance(value, (list, tuple)):
            value = value[-1] if value else ""
        return str(value)

    return get


def _show(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def resolve_dataset(params: Mapping[str, Any], known: Iterable[str], current: str) -> str:
    """The dataset a link asks for if it is known, else ``current`` (``from_params`` adds the note)."""
    asked = _getter(params)("dataset")
    return asked if asked is not None and asked in set(known) else current
