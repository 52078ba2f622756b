"""Offline guards: no model hub, no telemetry (the machine has no network at run time)."""
from __future__ import annotations

import os

_OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def enforce_offline() -> None:
    """Set the Hugging Face offline switches unless the user set them explicitly."""
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
