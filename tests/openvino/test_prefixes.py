"""Which prefix a call continues, and the bounded cache of KV snapshots."""

from __future__ import annotations

import numpy as np

from openjev.adapters.openvino.engine import Snapshot
from openjev.adapters.openvino.prefixes import Prefixes, Snapshots, key_of


def test_a_prompt_continues_the_longest_warmed_prefix_it_starts_with() -> None:
    prefixes = Prefixes()
    short, long = prefixes.add([1, 2, 3]), prefixes.add([1, 2, 3, 4, 5])
    prefixes.add([9, 9])
    assert prefixes.longest([1, 2, 3, 4, 5, 6]) == long
    assert prefixes.longest([1, 2, 3, 4, 7]) == short
    assert prefixes.longest([1, 2, 3, 4, 5]) == short  # a prompt never continues all of itself
    assert prefixes.longest([2, 3]) is None


def test_the_oldest_prefixes_are_forgotten_beyond_the_capacity() -> None:
    prefixes = Prefixes(capacity=2)
    prefixes.add([1])
    prefixes.add([2, 2])
    prefixes.add([3, 3, 3])
    assert prefixes.longest([1, 0]) is None and prefixes.longest([3, 3, 3, 0]) is not None


def snapshot(length: int, nbytes: int) -> Snapshot:
    return Snapshot(length=length, arrays={"k": np.zeros(nbytes, dtype=np.uint8)})


def test_snapshots_stay_within_their_bytes_least_recently_used_first_out() -> None:
    cache = Snapshots(max_bytes=250)
    a, b, c = key_of([1]), key_of([2]), key_of([3])
    cache.put(a, snapshot(1, 100))
    cache.put(b, snapshot(1, 100))
    assert cache.get(a) is not None  # a is now the most recent
    cache.put(c, snapshot(1, 100))
    assert cache.get(b) is None and cache.get(a) is not None and cache.get(c) is not None
    assert cache.bytes == 200
    cache.put(key_of([4]), snapshot(1, 300))  # larger than the whole cache: not kept
    assert cache.bytes == 200 and len(cache) == 2
