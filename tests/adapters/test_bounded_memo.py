"""The codecs' memo: bounded in entries and in input size, least recently used out first, never stale."""

from __future__ import annotations

import threading

import pytest

from openjev.adapters.bounded_memo import BoundedMemo


class Counting:
    """A pure function that records every key it is computed for."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, key: str) -> str:
        self.calls.append(key)
        return key.upper()


def test_a_remembered_value_is_computed_once() -> None:
    compute = Counting()
    memo = BoundedMemo(compute, len, max_entries=4, max_size=10)
    assert memo("abc") == memo("abc") == "ABC"
    assert compute.calls == ["abc"]
    assert (memo.hits, memo.misses, len(memo)) == (1, 1, 1)


def test_inputs_above_the_size_bound_are_never_kept() -> None:
    compute = Counting()
    memo = BoundedMemo(compute, len, max_entries=4, max_size=5)
    assert [memo("a long text") for _ in range(3)] == ["A LONG TEXT"] * 3
    assert compute.calls == ["a long text"] * 3
    assert len(memo) == 0


def test_the_least_recently_used_entry_goes_first_and_the_count_stays_bounded() -> None:
    compute = Counting()
    memo = BoundedMemo(compute, len, max_entries=3, max_size=1)
    for key in "abc":
        memo(key)
    memo("a")  # a hit: "a" becomes the most recent
    memo("d")  # evicts "b", the least recent
    assert len(memo) == 3
    compute.calls.clear()
    memo("a")
    memo("b")  # recomputed: it had been evicted
    assert compute.calls == ["b"]
    for n in range(100):
        memo(chr(0x100 + n))
    assert len(memo) == 3


def test_zero_entries_remembers_nothing() -> None:
    compute = Counting()
    memo = BoundedMemo(compute, len, max_entries=0)
    memo("k")
    memo("k")
    assert compute.calls == ["k", "k"]
    assert len(memo) == 0


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        BoundedMemo(str.upper, len, max_entries=-1)


def test_threads_sharing_a_memo_get_correct_values_within_the_bound() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(lambda key: key * key, lambda _: 1, max_entries=16, max_size=1)
    wrong: list[tuple[int, int]] = []

    def work(offset: int) -> None:
        for i in range(2000):
            key = (i * 7 + offset) % 40
            value = memo(key)
            if value != key * key:
                wrong.append((key, value))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert len(memo) <= 16
