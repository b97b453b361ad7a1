"""The codecs' memo: bounded in entries and in input size, least recently used out first, never stale."""

from __future__ import annotations

import functools
import threading

import pytest

from openjev.adapters.bounded_memo import BoundedMemo


def test_a_remembered_value_is_computed_once() -> None:
    memo: BoundedMemo[str, tuple[int, ...]] = BoundedMemo(max_entries=4, max_size=10)
    calls: list[str] = []

    def compute(text: str) -> tuple[int, ...]:
        calls.append(text)
        return tuple(map(ord, text))

    first = memo.get("abc", 3, lambda: compute("abc"))
    again = memo.get("abc", 3, lambda: compute("abc"))
    assert first == again == (97, 98, 99)
    assert calls == ["abc"]
    assert (memo.hits, memo.misses) == (1, 1)


def test_inputs_above_the_size_bound_are_never_kept() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=4, max_size=5)
    calls: list[str] = []

    def compute(text: str) -> str:
        calls.append(text)
        return text.upper()

    for _ in range(3):
        assert memo.get("a long text", 11, lambda: compute("a long text")) == "A LONG TEXT"
    assert calls == ["a long text"] * 3
    assert len(memo) == 0


def test_the_least_recently_used_entry_goes_first_and_the_count_stays_bounded() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(max_entries=3, max_size=1)
    for key in (1, 2, 3):
        memo.get(key, 1, functools.partial(int, key * 10))
    memo.get(1, 1, lambda: -1)  # a hit: 1 becomes the most recent
    memo.get(4, 1, lambda: 40)  # evicts 2, the least recent
    assert len(memo) == 3
    assert memo.get(1, 1, lambda: -1) == 10
    assert memo.get(2, 1, lambda: -2) == -2  # recomputed: it had been evicted
    for key in range(100, 200):
        memo.get(key, 1, functools.partial(int, key))
    assert len(memo) == 3


def test_zero_entries_remembers_nothing() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=0)
    values = iter(["first", "second"])
    assert memo.get("k", 1, lambda: next(values)) == "first"
    assert memo.get("k", 1, lambda: next(values)) == "second"
    assert len(memo) == 0


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        BoundedMemo(max_entries=-1)


def test_threads_sharing_a_memo_get_correct_values_within_the_bound() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(max_entries=16, max_size=1)
    wrong: list[tuple[int, int]] = []

    def work(offset: int) -> None:
        for i in range(2000):
            key = (i * 7 + offset) % 40
            value = memo.get(key, 1, functools.partial(int, key * key))
            if value != key * key:
                wrong.append((key, value))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert len(memo) <= 16
