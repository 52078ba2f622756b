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


def system_notes(dataset: Dataset, name: str) -> list[str]:
    """The notes shown beside ``name``'s numbers on ``dataset``, in reading order (empty when none apply)."""
    from core.analysis.held_out import held_out_note
    from core.registry import contamination_note, deviation_note

    notes = (contamination_note(name, dataset.name), deviation_note(name), profile_note(dataset.name, name),
             held_out_note(dataset, name))
    return [n for n in notes if n]


__all__ = ["DEFAULT_PROFILE", "profile_note", "system_notes"]
