"""A bounded LRU of answer priors: a question's label log-probabilities on a content-free state.

A prior depends only on the model and the exact prompt (the content-free state and the question in
one option order), so one process computes it once and every later request with the same question
reuses it. The key is a digest of the prompt's token ids and the label ids.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence

DEFAULT_ENTRIES = 4096  # one entry per question and option order: ~100 bytes each


def prior_key(token_ids: Sequence[int], label_ids: Sequence[int]) -> bytes:
    digest = hashlib.blake2b(array("q", token_ids).tobytes(), digest_size=20)
    digest.update(b"|labels|")
    digest.update(array("q", label_ids).tobytes())
    return digest.digest()


class PriorCache:
    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        if entries < 0:
            raise ValueError("a cache cannot hold a negative number of entries")
        self._entries = entries
        self._store: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes) -> tuple[float, ...] | None:
        found = self._store.get(key)
        if found is None:
            self.misses += 1
            return None
        self._store.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: bytes, logprobs: Sequence[float]) -> None:
        if self._entries == 0:
            return
        self._store[key] = tuple(logprobs)
        self._store.move_to_end(key)
        while len(self._store) > self._entries:
            self._store.popitem(last=False)

    def __len__(self) -> int:
        return len(self._store)
