"""A small thread-safe LRU memo for the prompt codecs' pure functions (tokenizing, rendering a template).

Every request repeats most of its prompt: the chat template's pieces, the tail after a question and
the question texts are the same from one request to the next, and only the state changes. Tokenizing
and rendering are deterministic, so their results are remembered here, within two bounds: at most
`max_entries` results, and only for inputs of at most `max_size` characters (a large state is
computed every time, never kept). With the defaults the memo holds at most 1,024 inputs of at most
1,024 characters each, and their results.

It is shared by the event loop and the threads that prepare large requests, hence the lock; the
computation itself runs outside it (tokenizing releases the GIL and may take a while).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 1024
DEFAULT_MAX_SIZE = 1024  # characters of input


class BoundedMemo(Generic[K, V]):
    """Least-recently-used results of a pure computation, for small inputs only.

    Values must be immutable (tuples, strings): every caller gets the same object.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if max_entries < 0 or max_size < 0:
            raise ValueError("max_entries and max_size must not be negative")
        self.max_entries = max_entries
        self.max_size = max_size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, size: int, compute: Callable[[], V]) -> V:
        """The remembered value for `key`, else `compute()` (remembered when `size` is within the bound)."""
        if size > self.max_size or self.max_entries == 0:
            return compute()
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            self.misses += 1
        value = compute()
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value
