"""A bounded LRU memo for the prompt codecs' pure functions (tokenizing, rendering a template).

Every request repeats most of its prompt: the chat template's pieces, the tail after a question and
the question texts are the same from one request to the next, and only the state changes. Tokenizing
and rendering are deterministic, so their results are remembered here, within two bounds: at most
`max_entries` results, and only for inputs of at most `max_size` characters (a large state is
computed every time, never kept). With the defaults the memo holds at most 1,024 inputs of at most
1,024 characters each, and their results.

`functools.lru_cache` does the remembering: implemented in C, safe to share between the event loop
and the threads that prepare large requests (a value may then be computed twice, never wrongly).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 1024
DEFAULT_MAX_SIZE = 1024  # characters of input


class BoundedMemo(Generic[K, V]):
    """`compute(key)`, remembered for the `max_entries` most recently used keys whose `size(key)` is small.

    `compute` must be pure and its values immutable (tuples, strings): every caller gets the same object.
    """

    def __init__(
        self,
        compute: Callable[[K], V],
        size: Callable[[K], int],
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        if max_entries < 0 or max_size < 0:
            raise ValueError("max_entries and max_size must not be negative")
        self.max_entries = max_entries
        self.max_size = max_size
        self._compute = compute
        self._size = size
        self._remembered = functools.lru_cache(maxsize=max_entries)(compute)

    def __call__(self, key: K) -> V:
        if self._size(key) > self.max_size:
            return self._compute(key)
        return self._remembered(key)

    def __len__(self) -> int:
        return self._remembered.cache_info().currsize

    @property
    def hits(self) -> int:
        return self._remembered.cache_info().hits

    @property
    def misses(self) -> int:
        return self._remembered.cache_info().misses
