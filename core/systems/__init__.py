"""The built-in systems' registrations: one light module per system, each defining ``REGISTRATION`` (its
``SystemSpec``; its code lives in the module the spec names, which exports the same ``REGISTRATION``).

Nothing here imports a system's code (torch, faiss, bm25s): reading every registration costs the import of these
small modules only, so a page that lists systems stays fast. No list of systems is kept: :func:`scan` reads every
module of a package, and a system's ``order`` says where it is listed. What several registrations share is below.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from core.system_spec import RegistrationError, SystemSpec, check_registration

__all__ = ["DENSE", "INTERPOLATION_NOTE", "builtin_registrations", "registration_for", "scan"]

# a dense first stage: vectors in a faiss index (and Milvus), with Compare's index knobs
DENSE = dict(family="dense", ann_indexable=True, milvus_servable=True, knobs=("index", "nprobe", "efSearch"))

INTERPOLATION_NOTE = ("served ranking: (1 − α) · its score + α · {partner}'s, each min-max normalised over the "
                      "query's candidates (BM25's top 20), α chosen on dev (600 queries, best MRR@100 over "
                      "α = 0 … .9; stored beside the model in interpolation.json; not in the paper)")


def scan(package: str) -> list[SystemSpec]:
    """The ``REGISTRATION`` of every module of ``package`` (``pkgutil``), ordered by ``order`` then name. A module
    without a :class:`SystemSpec` there, or a name given twice, is a ``RegistrationError`` naming the module."""
    root = importlib.import_module(package)
    specs: dict[str, tuple[str, SystemSpec]] = {}
    for info in pkgutil.iter_modules(root.__path__, f"{package}."):
        module = importlib.import_module(info.name)
        spec = check_registration(info.name, getattr(module, "REGISTRATION", None))
        if spec.name in specs:
            raise RegistrationError(f"{info.name}: {spec.name} is registered by {specs[spec.name][0]} already")
        specs[spec.name] = (info.name, spec)
    return sorted((spec for _, spec in specs.values()), key=lambda s: (s.order, s.name))


@lru_cache(maxsize=1)
def builtin_registrations() -> tuple[SystemSpec, ...]:
    """Every built-in system's registration, in listing order (read once)."""
    return tuple(scan(__name__))


def registration_for(module: str) -> SystemSpec:
    """The built-in registration whose code is ``module`` (what a system module exports as ``REGISTRATION``)."""
    found = [s for s in builtin_registrations() if s.module.partition(":")[0] == module]
    if len(found) != 1:
        raise RegistrationError(f"{module}: {len(found)} registrations in {__name__} name it as their module "
                                "(a system module has exactly one)")
    return found[0]
