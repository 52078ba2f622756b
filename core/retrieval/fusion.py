"""System "fusion": two or more first stages fused with ranx's ``fuse``, parameters tuned on the dev split.

The DenseTrans paper compares against hybrids of lexical and embedding rankers
(densetrans-cai2021.md §4.2.1, DESM-MIXTURE, BOW-CNN); this system builds such hybrids from any built
first stages of the registry.

Naming (a registry variant of system ``fusion``)
    ``PART+PART[+PART...]:METHOD[:untuned]``, PART any system expression: ``system``, ``system[variant]``,
    ``SYSTEM@DATASET`` (a model trained elsewhere, ``cross-encoder@qqp-bimpm``), a run or model folder added with
    ``core systems add``; METHOD one of ``FUSION_METHODS``. Examples: ``bm25+minilm:rrf``,
    ``run+cross-encoder@qqp-bimpm:rrf:untuned``. ``:untuned`` = the method's defaults, nothing chosen on any
    labels; ``fusion@VARIANT@DATASET`` applies the settings tuned on DATASET's dev split to another dataset. The run
    name is ``fusion@<variant>``; artifacts in ``registry.system_dir(dataset, "fusion", variant)``.
    ``fusion`` without a variant is ``DEFAULT_VARIANT``.

Methods (all through ``ranx.fuse``; each part contributes its top ``depth`` = 100 hits per query)
    ``rrf`` (Cormack et al. 2009), s(d) = Σ_i 1 / (k + rank_i(d)), k tuned on dev with ``ranx.optimize_fusion``
    (60 without a dev split); ``combsum`` (Fox & Shaw 1994), s(d) = Σ_i norm_i(d), nothing to tune; ``wsum``,
    s(d) = Σ_i w_i · norm_i(d), weights tuned on dev (grid step 0.1; equal without a dev split). norm = min-max
    per query over the part's top ``depth`` (missing: 0). Tuning metric: ``TUNE_METRIC`` on the dev split.

Core API (for the Compare page, Error Analysis, the CLI and Annotate's pool)
    - ``parse_variant(text) -> FusionSpec``: validates a name; bad input raises one clear message.
    - ``build(dataset, variant=..., loader=...)``: tunes on dev, writes ``config.json`` + ``metrics.json``.
      ``python -m core train --system fusion --variant bm25+minilm:rrf``.
    - ``load(dataset, variant=..., loader=...) -> FusionRetriever``: ``search(query, k, exclude=[qid])``, one live
      fused query, ``search_many`` the batched form; ``loader(name, variant) -> Retriever`` lets a page share its
      loaded parts (the one loader passes itself); fusion imports no serving code.
    - ``fuse_runs(runs, method, params) -> ranx.Run``: fuse stored runs (e.g. ``core.analysis.runs``) without
      loading any model (the methods and their tuning are ``core.retrieval.ranx_fusion``).
    - ``built_variants(dataset)``: the fusion variants built for a dataset (for a page's picker).
    In Compare: ``SystemChoice("fusion", variant="bm25+minilm:rrf")``; in the CLI:
    ``python -m core eval --system fusion --variant bm25+minilm:rrf --split test``.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.data.pipeline import check_stamp, is_current, stamped
from core.artifacts import load_json, save_json
from core.data.datasets import Dataset
from core.errors import MissingArtifactError, StudioError
from core.paths import artifact_dir
from core.registry import build_command, slug, system_dir
from core.retrieval.base import Hits, ProgressFn, Ranking, Retriever, no_progress, validate_query
from core.retrieval.ranx_fusion import (FUSION_METHODS, RRF_K_DEFAULT, TUNE_METRIC, default_params,  # noqa: F401
                                        fuse_dicts, fuse_runs, ranx_run, tune)
from core.systems import registration_for

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

DEFAULT_VARIANT = "bm25+minilm:rrf"
VARIANTS = tuple(f"{parts}:{m}" for parts in ("bm25+minilm", "bm25+densetrans") for m in FUSION_METHODS)
VARIANT_PATTERN = r"[^:]+\+[^:]+:[a-z]+(?::untuned)?"
UNTUNED = ":untuned"  # a variant's suffix: the method's defaults (RRF k = 60, equal weights), chosen on no labels
DEPTH = 100

Loader = Callable[[str, "str | None"], Retriever]


@dataclass(frozen=True)
class FusionSpec:
    """Parsed fusion name: parts ((system, variant or None), ...) and the method."""

    parts: tuple[tuple[str, str | None], ...]
    method: str
    untuned: bool = False  # the method's defaults, nothing chosen on any labels

    @property
    def part_labels(self) -> list[str]:
        return [s + (f"[{v}]" if v else "") for s, v in self.parts]

    @property
    def variant(self) -> str:
        return "+".join(self.part_labels) + f":{self.method}" + (UNTUNED if self.untuned else "")


@dataclass
class FusionConfig:
    """What ``build`` saves: the parts, the method, its tuned parameters, and how they were tuned."""

    variant: str
    method: str
    parts: list[str]
    params: dict = field(default_factory=dict)
    depth: int = DEPTH
    tuned_on: str = ""  # "dev (N queries, map@100)" or why nothing was tuned
    tune_metric: str = TUNE_METRIC


def parse_variant(text: str | None) -> FusionSpec:
    """``bm25+minilm:rrf`` -> FusionSpec; raises ``StudioError`` naming what is wrong (nothing is run)."""
    from core.registry import get_spec, parse_name

    text = (text or DEFAULT_VARIANT).strip()
    untuned = text.endswith(UNTUNED)
    text = text.removesuffix(UNTUNED)
    if ":" not in text:
        raise StudioError(f"fusion name {text!r}: expected PART+PART:METHOD, e.g. {DEFAULT_VARIANT} "
                          f"(methods: {', '.join(FUSION_METHODS)})")
    body, _, method = text.rpartition(":")
    if method not in FUSION_METHODS:
        raise StudioError(f"fusion method {method!r} is unknown; known: {', '.join(FUSION_METHODS)}")
    labels = re.findall(r"([^+\[\]]+)(?:\[([^\]]*)\])?(?:\+|$)", body)
    if len(labels) < 2 or "".join(n + (f"[{v}]" if v else "") + "+" for n, v in labels)[:-1] != body:
        raise StudioError(f"fusion name {text!r}: name two or more first stages joined by '+', e.g. bm25+minilm "
                          "(a part's variant in brackets: minilm[finetuned])")
    if len(set(labels)) != len(labels):
        raise StudioError(f"fusion name {text!r}: a first stage is named twice")
    parts = []
    for name, variant in labels:  # a part is any system expression: SYSTEM[VARIANT], SYSTEM@VARIANT, SYSTEM@DATASET
        spec = get_spec(name)  # UnknownNameError lists the systems
        if spec.composite:
            raise StudioError(f"{name} cannot be a part of a fusion (it is one)")
        if variant and variant not in spec.variants:
            raise StudioError(f"{name} has no variant {variant!r}; known: {', '.join(spec.variants) or 'none'}")
        if "@" in name:
            parse_name(name, variant or None)  # an unknown variant or training dataset: one line
        parts.append((name, variant or None))
    return FusionSpec(tuple(parts), method, untuned)


def chooses_on_dev(variant: str | None) -> bool:
    """Whether building ``variant`` chooses its settings on a dataset's dev labels (an untuned fusion does not)."""
    return not parse_variant(variant).untuned


def parts(variant: str | None) -> list[tuple[str, str | None]]:
    """The (system, variant) parts a fusion variant is made of (what a composite system provides)."""
    return list(parse_variant(variant).parts)


def fuse_stored(dataset: Dataset, variant: str | None, part_run: Callable[[str, str | None], Mapping | None],
                depth: int, progress: ProgressFn = no_progress) -> dict[str, list[tuple[str, float]]] | None:
    """A fusion's run from its parts' stored runs (``part_run(system, variant)``: ``{qid: {doc: score}}`` of a
    fresh stored run, else None), fused with the built variant's tuned parameters: exactly what
    ``FusionRetriever.search_many`` fuses when the parts' runs are their top ``DEPTH``; None when a part has no
    fresh run or the depths differ."""
    spec = parse_variant(variant)
    config = load_config(dataset, spec.variant)
    if config.depth != DEPTH or DEPTH != depth:
        return None
    runs = []
    for system, part_variant in spec.parts:
        run = part_run(system, part_variant)
        if run is None:
            return None
        runs.append(run)
    progress(0.1, f"fusion {spec.variant}: fusing the parts' stored runs")
    return fuse_dicts(runs, spec.method, config.params, depth)


def _folder(dataset_name: str, variant: str | None) -> Path:
    """The variant's folder on ``dataset_name``; a part pinned there (``X@dataset_name``) is the part ``X`` itself."""
    from core.registry import parse_name

    spec = parse_variant(variant)
    native = [(n.system, n.variant) if n.trained_on in (None, dataset_name) else (p, v)
              for (p, v), n in ((part, parse_name(*part)) for part in spec.parts)]
    return system_dir(dataset_name, "fusion", FusionSpec(tuple(native), spec.method, spec.untuned).variant)


# ----------------------------------------------------------------------------- retriever
class FusionRetriever(Retriever):
    """Fused first stages: each part ranks its top ``depth``, ranx fuses, the top k is returned."""

    def __init__(self, spec: FusionSpec, parts: Sequence[Retriever], params: Mapping | None = None,
                 depth: int = DEPTH) -> None:
        if len(parts) != len(spec.parts):
            raise StudioError(f"fusion {spec.variant}: {len(spec.parts)} parts named, {len(parts)} loaded")
        self.spec, self.parts, self.params, self.depth = spec, list(parts), dict(params or {}), depth
        self.name = f"fusion@{spec.variant}"
        self.batch_size = max(p.batch_size for p in self.parts)

    def _fuse(self, per_part: Sequence[Mapping[str, Ranking]], k: int) -> dict[str, list[tuple[str, float]]]:
        return fuse_dicts([{q: r.as_dict() for q, r in part.items()} for part in per_part], self.spec.method,
                          self.params, k)

    def retrieve(self, texts: list[str], k: int) -> Hits:
        """Batched fusion without self-match handling (``search``/``search_many`` drop it in each part)."""
        depth = max(self.depth, k)
        per_part = []
        for part in self.parts:
            hits = part.retrieve(texts, depth)
            per_part.append({str(i): Ranking(part.name, ids, sc) for i, (ids, sc) in enumerate(zip(hits.ids, hits.scores))})
        fused = self._fuse(per_part, k)
        rows = [fused.get(str(i), []) for i in range(len(texts))]
        return Hits([[d for d, _ in r] for r in rows], [[s for _, s in r] for r in rows])

    def search(self, query: str, k: int = 10, exclude: Sequence[str] = ()) -> Ranking:
        """One live fused query; ``exclude`` (e.g. the query's own id) is dropped in every part first."""
        query = validate_query(query)
        start = time.perf_counter()
        per_part, stats = [], {}
        for label, part in zip(self.spec.part_labels, self.parts):
            ranking = part.search(query, max(self.depth, k), exclude=exclude)
            per_part.append({"q": ranking})
            stats[f"{label}_seconds"] = ranking.seconds
        t0 = time.perf_counter()
        fused = self._fuse(per_part, k).get("q", [])
        stats["fuse_seconds"] = time.perf_counter() - t0
        return Ranking(self.name, [d for d, _ in fused], [s for _, s in fused], time.perf_counter() - start, stats)

    def search_many(self, queries: Mapping[str, str], k: int = 100, ignore_identical_ids: bool = True,
                    progress: ProgressFn = no_progress) -> dict[str, Ranking]:
        """Every part's ``search_many`` (self-matches dropped there), then one ranx fusion of all queries."""
        n = len(self.parts)
        per_part = []
        t0 = time.perf_counter()
        for i, part in enumerate(self.parts):
            per_part.append(part.search_many(
                queries, k=max(self.depth, k), ignore_identical_ids=ignore_identical_ids,
                progress=lambda f, m, i=i: progress((i + f) / (n + 0.2), f"fusion part {i + 1}/{n}: {m}")))
        progress(n / (n + 0.2), f"{self.name}: fusing {len(queries):,} queries")
        fused = self._fuse(per_part, k)
        per_query = (time.perf_counter() - t0) / max(1, len(queries))
        progress(1.0, f"{self.name}: {len(queries):,}/{len(queries):,} queries")
        return {q: Ranking(self.name, [d for d, _ in fused.get(q, [])], [s for _, s in fused.get(q, [])], per_query)
                for q in queries}


# ----------------------------------------------------------------------------- system contract
def _dev_parts(dataset: Dataset, parts: Sequence, progress: ProgressFn) -> tuple[dict, list[dict]]:
    """Each part's dev rankings: its top ``DEPTH`` of the collection, or on candidate lists its ranking of each
    dev query's own candidates."""
    qrels = dataset.split_qrels("dev") if "dev" in dataset.query_splits else {}
    queries = {q: dataset.queries[q] for q in qrels}
    cands = {q: Ranking("candidates", list(dataset.candidates[q]), [0.0] * len(dataset.candidates[q]))
             for q in queries if dataset.candidates.get(q)} if dataset.candidates else {}
    runs = []
    for i, part in enumerate(parts):
        report = lambda f, m, i=i: progress(0.8 * (i + f) / len(parts), m)  # noqa: E731
        if dataset.candidates:
            rankings = part.rerank_many({q: queries[q] for q in cands}, cands, dataset.corpus, progress=report)
        else:
            rankings = part.search_many(queries, k=DEPTH, ignore_identical_ids=dataset.ignore_identical_ids,
                                        progress=report)
        runs.append({q: r.as_dict() for q, r in rankings.items()})
    return qrels, runs


def _parts(dataset: Dataset, spec: FusionSpec, loader: Loader) -> list:
    """The loaded parts; on a collection only first stages rank it (a reranker part is refused in one line)."""
    from core.registry import get_spec

    if not dataset.candidates:
        wrong = [label for label, (name, _) in zip(spec.part_labels, spec.parts) if get_spec(name).kind != "retriever"]
        if wrong:
            raise StudioError(f"fusion {spec.variant} on {dataset.name}: {', '.join(wrong)} cannot search a collection "
                              "(a reranker); on a collection fuse first stages, on candidate lists any system")
    return [loader(name, v) for name, v in spec.parts]


def _retriever(dataset: Dataset, spec: FusionSpec, parts: list, params: Mapping, depth: int = DEPTH):
    """The fused system: over a collection a ``FusionRetriever``; over candidate lists a ``CandidateFusion``."""
    if dataset.candidates:
        from core.retrieval.fusion_candidates import CandidateFusion

        return CandidateFusion(spec, parts, params, fuse=fuse_dicts)
    return FusionRetriever(spec, parts, params, depth)


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, *, loader: Loader) -> dict:
    """Tune the method's parameters on the dev split (ranx ``optimize_fusion``) and save them.

    The parts must be built (``MissingArtifactError`` names the command of the first one missing).
    ``profile`` is accepted for the build contract; the recipe is the same in every profile. The parts come
    through ``loader`` (the one loader's ``core.serving.loader.part_loader``; ``core.build`` passes it).
    """
    from core.evaluation import evaluate_run

    spec = parse_variant(variant)
    start = time.perf_counter()
    parts = _parts(dataset, spec, loader)
    params = default_params(spec.method, len(parts))
    qrels, dev_runs = ({}, []) if spec.untuned else _dev_parts(dataset, parts, progress)
    metrics: dict = {"profile": profile, "variant": spec.variant, "dev_queries": len(qrels)}
    if spec.untuned:
        tuned_on = "untuned: the method's defaults, nothing chosen on any labels"
    elif qrels:
        progress(0.85, f"fusion {spec.variant}: tuning on {len(qrels):,} dev queries")
        tuned = tune(qrels, dev_runs, spec.method)
        params.update(tuned)
        tuned_on = f"dev ({len(qrels):,} queries, {TUNE_METRIC})" if tuned else "nothing to tune (combsum)"
        fused = fuse_dicts(dev_runs, spec.method, params)
        fused_run = {q: dict(v) for q, v in fused.items()}
        for label, run in zip(spec.part_labels, dev_runs):
            metrics[f"dev_{TUNE_METRIC}[{label}]"] = evaluate_run(qrels, ranx_run(run, label), [TUNE_METRIC])[TUNE_METRIC]
        metrics[f"dev_{TUNE_METRIC}"] = evaluate_run(qrels, ranx_run(fused_run, "fusion"), [TUNE_METRIC])[TUNE_METRIC]
    else:
        tuned_on = "defaults: the dataset has no dev split with relevant items"
    config = FusionConfig(spec.variant, spec.method, spec.part_labels, params, DEPTH, tuned_on)
    folder = _folder(dataset.name, spec.variant)
    metrics.update({"params": params, "tuned_on": tuned_on, "build_seconds": time.perf_counter() - start})
    save_json(folder / "config.json", stamped(config))
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"fusion {spec.variant}: built ({tuned_on})")
    return metrics


def _part_built(dataset: Dataset, name: str, variant: str | None) -> bool:
    """A part is built here, or (``SYSTEM@DATASET``) trained on the dataset it names."""
    from core.registry import parse_name, system_module, trained_datasets

    parsed = parse_name(name, variant)
    if parsed.trained_on and parsed.trained_on != dataset.name:
        return parsed.trained_on in trained_datasets(parsed.system, parsed.variant)
    return system_module(parsed.system).is_built(dataset, variant=parsed.variant)


def _pinned(part: str, variant: str | None, dataset_name: str) -> tuple[str, str | None]:
    from core.registry import SystemName, get_spec, learns_from_labels, parse_name

    name = parse_name(part, variant)
    learns = name.trained_on is None and learns_from_labels(get_spec(name.system), name.variant)
    return (str(SystemName(name.system, name.variant, dataset_name)), None) if learns else (part, variant)


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    """The tuned config exists (an untuned variant needs none) and every part is built."""
    try:
        spec = parse_variant(variant)
    except StudioError:
        return False
    if not spec.untuned and not is_current(_folder(dataset.name, spec.variant) / "config.json"):
        return False  # tuned on parts of this pipeline
    try:
        return all(_part_built(dataset, name, v) for name, v in spec.parts)
    except (ModuleNotFoundError, StudioError):
        return False


def load_config(dataset: Dataset, variant: str | None = None, tuned_on: str | None = None) -> FusionConfig:
    """The tuned ``FusionConfig`` of a built variant, tuned on ``dataset`` or on the dataset named ``tuned_on``
    (``MissingArtifactError`` names the build command)."""
    spec = parse_variant(variant)
    source = tuned_on or dataset.name
    command = build_command("fusion", source, spec.variant)
    raw = load_json(_folder(source, spec.variant) / "config.json", f"the fusion {spec.variant} tuned on {source}", command)
    check_stamp(raw, f"the fusion {spec.variant}", command)
    try:
        return FusionConfig(**{k: v for k, v in raw.items() if k != "text_pipeline"})
    except TypeError:
        raise MissingArtifactError(f"the fusion {spec.variant}", command, "corrupt config.json") from None


def load(dataset: Dataset, variant: str | None = None, *, loader: Loader, tuned_on: str | None = None, **options):
    """The fused retriever of a built variant (``MissingArtifactError`` names the build command); ``depth=N``: hits
    per part. On candidate lists a ``CandidateFusion`` (``core.retrieval.fusion_candidates``). ``tuned_on=NAME`` applies the settings chosen on another
    dataset's dev split (``fusion@VARIANT@NAME``: the parts rank this dataset). A ``...:untuned`` variant fuses with the
    method's defaults (RRF k = 60, equal weights), nothing chosen on any labels; ``untuned_ok=True`` does the same
    for a variant not tuned yet instead of raising. ``retriever.tuned`` / ``retriever.tuned_on`` say which it is.
    """
    spec = parse_variant(variant)
    if tuned_on:  # the fusion as built there: a learning part that names no dataset is the model trained there
        spec = FusionSpec(tuple(_pinned(p, v, tuned_on) for p, v in spec.parts), spec.method, spec.untuned)
    config = None
    if not spec.untuned:
        try:
            config = load_config(dataset, spec.variant, tuned_on)
        except MissingArtifactError:
            if not options.get("untuned_ok"):
                raise
    parts = _parts(dataset, spec, loader)
    if config is None:
        retriever = _retriever(dataset, spec, parts, default_params(spec.method, len(parts)))
        retriever.tuned, retriever.tuned_on = False, "untuned defaults"
        return retriever
    retriever = _retriever(dataset, spec, parts, config.params, int(options.get("depth", config.depth)))
    source = tuned_on or dataset.name
    retriever.tuned, retriever.tuned_on = True, "tuned on dev" if source == dataset.name else f"tuned on the dev of {source}"
    return retriever


def built_variants(dataset: Dataset) -> list[str]:
    """Fusion variants with a tuned config for ``dataset`` whose parts are built."""
    root = artifact_dir("systems", slug(dataset.name))
    out = []
    for folder in sorted(root.glob("fusion@*")):
        try:
            variant = json.loads((folder / "config.json").read_text(encoding="utf-8"))["variant"]
        except (OSError, ValueError, KeyError):
            continue
        if is_built(dataset, variant):
            out.append(variant)
    return out


def config_dict(variant: str | None = None) -> dict:
    spec = parse_variant(variant)
    return {"variant": spec.variant, "parts": spec.part_labels, "method": spec.method, "depth per part": DEPTH,
            "tuning": f"ranx optimize_fusion on the dev split ({TUNE_METRIC})",
            "defaults without dev": {"rrf": {"k": RRF_K_DEFAULT}, "wsum": "equal weights", "combsum": "none"}}
