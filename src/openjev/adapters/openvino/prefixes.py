"""Which prefix a call continues, and the KV caches kept after prefixes (pure, bounded).

A call is evaluated as its request's prefix, then the rest (engine.py): where the prefix ends must
not depend on what the cache holds, so the backend remembers every prefix it was asked to warm
(`Prefixes`, by length and digest, bounded in count) apart from the KV caches it keeps
(`Snapshots`, bounded in bytes). A call whose prefix's cache was evicted recomputes it from the
same split and gets the same bits.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Sequence

import numpy as np

from openjev.adapters.openvino.engine import Snapshot

Key = tuple[int, bytes]


def key_of(token_ids: Sequence[int]) -> Key:
    data = np.asarray(token_ids, dtype=np.int64).tobytes()
    return len(token_ids), hashlib.blake2b(data, digest_size=16).digest()


class Prefixes:
    """The warmed prefixes, most recent last; a call continues the longest one its prompt starts with."""

    def __init__(self, capacity: int = 65536) -> None:
        self._keys: OrderedDict[Key, None] = OrderedDict()
        self._lengths: Counter[int] = Counter()
        self._capacity = capacity

    def add(self, token_ids: Sequence[int]) -> Key:
        key = key_of(token_ids)
        if key in self._keys:
            self._keys.move_to_end(key)
            return key
        self._keys[key] = None
        self._lengths[key[0]] += 1
        while len(self._keys) > self._capacity:
            old, _ = self._keys.popitem(last=False)
            self._lengths[old[0]] -= 1
            if not self._lengths[old[0]]:
                del self._lengths[old[0]]
        return key

    def longest(self, token_ids: Sequence[int]) -> Key | None:
        """The longest warmed prefix strictly shorter than `token_ids` that it starts with."""
        for length in sorted(self._lengths, reverse=True):
            if length < len(token_ids):
                key = key_of(token_ids[:length])
                if key in self._keys:
                    self._keys.move_to_end(key)
                    return key
        return None


class Snapshots:
    """KV caches after prefixes, least recently used evicted first beyond `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self._items: OrderedDict[Key, Snapshot] = OrderedDict()
        self._max_bytes = max_bytes
        self.bytes = 0

    def get(self, key: Key) -> Snapshot | None:
        snapshot = self._items.get(key)
        if snapshot is not None:
            self._items.move_to_end(key)
        return snapshot

    def put(self, key: Key, snapshot: Snapshot) -> None:
        if snapshot.nbytes > self._max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old.nbytes
        self._items[key] = snapshot
        self.bytes += snapshot.nbytes
        while self.bytes > self._max_bytes:
            _, evicted = self._items.popitem(last=False)
            self.bytes -= evicted.nbytes

    def __len__(self) -> int:
        return len(self._items)
