"""A process-wide, thread-safe LRU of computed results (``ui.cache.result_cache`` keeps one per kind)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["ResultCache"]


class ResultCache:
    """A process-wide, thread-safe LRU of computed results: plain data only, never UI elements.

    ``st.cache_data`` records the Streamlit calls a cached function makes and replays them for the
    next session; a progress bar created by the page and drawn inside the cached function then
    raises ``CacheReplayClosureError`` for every later visitor. Long computations that report
    progress therefore run outside any ``st.cache_*`` function and keep their result here.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        """The stored value for ``key`` (marked most recently used), else ``default``."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value) -> None:
        """Store ``value``; the least recently used entry goes when the cache is full."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
