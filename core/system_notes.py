"""Every note shown beside a system's numbers, in one place: the CLI, Compare, Error Analysis and Models.

A system's numbers carry up to four notes: MiniLM's Quora pre-training on a QQP dataset, how the default
build's recipe differs from the paper's, a model below its untrained reference on held-out queries, and
a model trained with another profile than the default build's (``--profile paper`` or ``full``), whose
settings are then not the recipe its display name and deviation note describe.
"""
from __future__ import annotations

from core.data.dataset_model import Dataset

DEFAULT_PROFILE = "quick"  # what the default build trains (core.training.PROFILES)
_PROFILE_TEXT = {
    "paper": "the paper's hyper-parameters as far as this data allows",
    "full": "the default recipe with longer step caps and patience",
}


def profile_note(dataset_name: str, name: str) -> str | None:
    """The note for a built model of ``name`` (``SYSTEM[@VARIANT]``) trained with a profile other than the
    default build's, read from its saved metrics; None for the default profile, a model not built, or one
    that records no profile."""
    from core.errors import StudioError
    from core.model_cards import metrics_file
    from core.registry import parse_name

    try:
        parsed = parse_name(name)
    except (StudioError, ValueError):
        return None
    if parsed.trained_on and parsed.trained_on != dataset_name:
        return None
    profile = metrics_file(dataset_name, parsed.system, parsed.variant).get("profile")
    if not isinstance(profile, str) or profile == DEFAULT_PROFILE:
        return None
    what = _PROFILE_TEXT.get(profile, f"the {profile} profile's settings")
    return (f"{name}: this model was trained with --profile {profile} ({what}), not the default build's "
            f"{DEFAULT_PROFILE} profile: a recipe or deviation named beside it is the default build's; this model's "
            "own settings are in its config (Models page)")


def recorded_note(dataset_name: str, name: str) -> str | None:
    """What the build of a trained model recorded (never its registration's template): the profile, the steps it
    ran and why it stopped, its best dev step, the split it was trained and chosen on, and how it is served (the
    interpolation weight it saved, or none); None for a system that trains nothing or a model not built."""
    from core.errors import StudioError
    from core.model_cards import metrics_file
    from core.registry import get_spec, parse_name, system_path

    try:
        parsed = parse_name(name)
        spec = get_spec(parsed.system)
    except (StudioError, ValueError):
        return None
    from core.build_status import _raw_status
    from core.model_cards import training_log

    source = parsed.trained_on or dataset_name
    metrics = metrics_file(source, parsed.system, parsed.variant)
    if spec.kind_family == "run" or spec.composite or not metrics:
        return None
    status = _raw_status(source, parsed.system, parsed.variant)
    metrics = {**metrics, **(status.metrics if status is not None and isinstance(status.metrics, dict) else {})}
    bits = [f"trained on {source}" + (f" with the {metrics['profile']} profile" if metrics.get("profile") else "")]
    log = training_log(source, parsed.system, parsed.variant, metrics) or {}
    if log.get("curve"):
        bits.append(f"{log['curve'][-1]['step']} steps run, stopped by {log.get('stopped') or 'its cap'}, best dev "
                    f"{log.get('dev_metric', 'metric')} at step {log.get('best_step')}")
    elif metrics.get("best_epoch") is not None:
        bits.append(f"best dev at epoch {metrics['best_epoch']}")
    split = metrics.get("split") if isinstance(metrics.get("split"), dict) else {}
    if split.get("train") and split.get("dev"):
        bits.append(f"train split {split['train']['queries']} queries / {split['train']['pairs']} pairs, choices on "
                    f"dev {split['dev']['queries']} queries")
    if spec.kind == "reranker":
        from core.rerank.interpolation import read

        mixed = read(system_path(source, parsed.system, None if parsed.variant in (None, "full") else parsed.variant))
        bits.append(f"served mixed with {mixed.partner or mixed.first_stage} (weight {mixed.weight} chosen on "
                    f"{mixed.dev_queries} dev queries)" if mixed else "served on its own score (no interpolation "
                    "weight was saved)")
    return f"{name}: as built: " + "; ".join(bits)


def truncation_note(dataset: Dataset, name: str) -> str | None:
    """How many of ``dataset``'s queries and texts a MiniLM-based system cuts (longer than its word-piece limit),
    counted once per dataset (``core.retrieval.minilm_encoder.truncation_counts``); None when nothing is cut."""
    from core.errors import StudioError
    from core.registry import get_spec

    try:
        spec = get_spec(name)
    except StudioError:
        return None
    if not spec.minilm_derived or spec.composite:
        return None
    from core.retrieval.minilm_encoder import truncation_counts

    counts = truncation_counts(dataset)
    if not counts["long_queries"] and not counts["long_texts"]:
        return None
    return (f"{name}: MiniLM reads at most {counts['max_length']} word pieces: {counts['long_queries']:,} of "
            f"{counts['queries']:,} queries and {counts['long_texts']:,} of {counts['texts']:,} texts of {dataset.name} "
            "are longer and are cut (a cross-encoder reads query and text together within that limit)")


def system_notes(dataset: Dataset, name: str) -> list[str]:
    """The notes shown beside ``name``'s numbers on ``dataset``, in reading order (empty when none apply). A built
    model trained outside its registration's default datasets shows what its build recorded instead of the
    registration's recipe note (which describes the default build)."""
    from core.analysis.held_out import held_out_note
    from core.registry import contamination_note, deviation_note, get_spec, parse_name

    recorded = recorded_note(dataset.name, name)
    deviation = deviation_note(name)
    if recorded is not None:
        parsed = parse_name(name)
        if (parsed.trained_on or dataset.name) not in get_spec(parsed.system).datasets:
            deviation = None
    notes = (contamination_note(name, dataset.name), deviation, recorded, profile_note(dataset.name, name),
             truncation_note(dataset, name), held_out_note(dataset, name))
    return [n for n in notes if n]


__all__ = ["DEFAULT_PROFILE", "profile_note", "recorded_note", "system_notes", "truncation_note"]
