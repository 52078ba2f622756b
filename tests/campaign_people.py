"""The people of the campaign tests: one owner and a team of three annotators."""
from __future__ import annotations

__all__ = ["OWNER", "TEAM"]

OWNER = "olivia@lab"
TEAM = ("ann", "bob", "cat")
