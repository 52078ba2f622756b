"""Does a learned system beat its untrained or zero-shot reference on held-out queries?

A model is "done" when it beats its reference on held-out queries; when it does not, every place that
shows it says so (the build's output, Models, Compare, Error Analysis, ``core eval``). The dev check of
``core.model_cards.below_reference`` reads the trainer's own dev metric (pair AUC for the rerankers);
this module checks the task the app serves: the ranking of the held-out split's queries (QQP: the 1,781
test queries, each dropped from its own ranking; rerankers over BM25's top 20), H@1 and MRR@100, from the
build's stored runs (``core.analysis.runs``), through the same evaluation module as every table.

``held_out_verdict(dataset, system, compute=True)`` computes and caches the verdict
(``var/stored-runs/<dataset>/held-out/<system>.json``, keyed by both runs' fingerprints); pages call it
with ``compute=False`` and only read a cached verdict (the build writes it).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from core.data.datasets import Dataset
from core.errors import StudioError
from core.paths import artifact_dir
from core.registry import get_spec, slug

METRICS = ("hit_rate@1", "mrr@100")
PRIMARY = "hit_rate@1"


@dataclass(frozen=True)
class HeldOutVerdict:
    """A learned system against its reference on the held-out split's queries."""

    system: str
    reference: str
    split: str
    queries: int
    scores: dict[str, float]
    reference_scores: dict[str, float]
    fingerprint: str = ""

    @property
    def below(self) -> bool:
        """Below its reference on H@1 or on MRR@100 (it must beat it on both)."""
        return any(self.scores[m] < self.reference_scores[m] for m in METRICS)

    @property
    def word(self) -> str:
        """"**is below**", "beats" (above on both metrics) or "matches or beats" (a tie on one)."""
        if self.below:
            return "**is below**"
        return "beats" if all(self.scores[m] > self.reference_scores[m] for m in METRICS) else "matches or beats"

    def line(self) -> str:
        """One line for every place that shows the system."""
        mine, ref = self.scores[PRIMARY], self.reference_scores[PRIMARY]
        where = f"{self.queries:,} held-out {self.split} queries"
        if self.below:
            return (f"BELOW ITS REFERENCE on {where}: H@1 {mine:.4f} vs {self.reference} {ref:.4f} "
                    f"(MRR@100 {self.scores['mrr@100']:.4f} vs {self.reference_scores['mrr@100']:.4f}); "
                    f"use {self.reference}, or train longer / on more data")
        return (f"{self.word} its reference on {where}: H@1 {mine:.4f} vs {self.reference} {ref:.4f}, "
                f"MRR@100 {self.scores['mrr@100']:.4f} vs {self.reference_scores['mrr@100']:.4f}")


def reference_of(system: str, variant: str | None = None) -> str | None:  # noqa: ARG001 (variants share it)
    """The reference a learned system must beat (its registration's ``reference``), or None (untrained and
    zero-shot systems have none)."""
    if "@" in system:
        return None
    try:
        return get_spec(system).reference or None
    except StudioError:
        return None


def _leaf(system: str, variant: str | None) -> str:
    return system if not variant else f"{system}@{slug(variant)}"


def _cache_path(dataset: Dataset, system: str, variant: str | None) -> Path:
    return artifact_dir("stored-runs", slug(dataset.name), "held-out") / f"{_leaf(system, variant)}.json"


def held_out_verdict(dataset: Dataset, system: str, variant: str | None = None, compute: bool = True,
                     loader=None) -> HeldOutVerdict | None:
    """The verdict for ``system`` (None: no reference, no held-out split, or not cached and ``compute`` off).

    Cached by both runs' fingerprints (a retrained model or a rebuilt reference makes it stale)."""
    from core.analysis import runs

    reference = reference_of(system, variant)
    split = runs.default_split(dataset)
    if reference is None or split != "test":
        return None
    key = f"{runs.fingerprint(dataset, system, variant)}:{runs.fingerprint(dataset, reference)}"
    path = _cache_path(dataset, system, variant)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("fingerprint") == key:
            return HeldOutVerdict(**cached)
    except (OSError, ValueError, TypeError):
        pass
    if not compute:
        return None
    from core.evaluation import evaluate_run

    qrels = dataset.split_qrels(split)
    queries = {q: dataset.queries[q] for q in qrels}
    name = _leaf(system, variant)
    mine, ref = runs.load_runs(dataset, [name, reference], queries, k=100, loader=loader)
    verdict = HeldOutVerdict(system=name, reference=reference, split=split, queries=len(queries),
                             scores={m: round(v, 4) for m, v in evaluate_run(qrels, mine, list(METRICS)).items()},
                             reference_scores={m: round(v, 4) for m, v in evaluate_run(qrels, ref, list(METRICS)).items()},
                             fingerprint=key)
    path.write_text(json.dumps(asdict(verdict), indent=2), encoding="utf-8")
    return verdict


def held_out_note(dataset: Dataset, name: str, compute: bool = False) -> str | None:
    """The one-line warning for ``name`` (``SYSTEM[@VARIANT]``) when it is below its reference on held-out
    queries, else None; pages pass ``compute=False`` (only a verdict the build cached is read)."""
    from core.errors import StudioError
    from core.registry import parse_name

    try:
        parsed = parse_name(name)
        if parsed.trained_on and parsed.trained_on != dataset.name:
            return None
        verdict = held_out_verdict(dataset, parsed.system, parsed.variant, compute=compute)
    except (StudioError, OSError, ValueError, KeyError):
        return None
    return f"{verdict.system}: {verdict.line()}" if verdict is not None and verdict.below else None


def check_built(dataset: Dataset, names: list[tuple[str, str | None]], echo: bool = True) -> list[HeldOutVerdict]:
    """Compute (and cache) the verdict of every built learned system in ``names`` after a build; prints each."""
    out = []
    for system, variant in names:
        if reference_of(system, variant) is None:
            continue
        try:
            verdict = held_out_verdict(dataset, system, variant, compute=True)
        except Exception as exc:  # noqa: BLE001 - a verdict that cannot be computed must not fail the build
            if echo:
                print(f"[held-out] {system}: not checked ({type(exc).__name__}: {exc})", flush=True)
            continue
        if verdict is not None:
            out.append(verdict)
            if echo:
                print(f"[held-out] {verdict.system}: {verdict.line()}", flush=True)
    return out
