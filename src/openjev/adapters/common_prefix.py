"""The longest common prefix of two token sequences: what a prompt cache can reuse.

Shared by the embedded backend's slot routing and the fake backend's made-up cache report.
"""

from __future__ import annotations

from collections.abc import Sequence

_BLOCK = 256  # the first block compared; equal blocks double
_SCAN = 8  # a differing block is halved down to this many elements, then scanned


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, by slice comparisons (C speed on long prompts).

    Equal blocks grow geometrically; the block that differs is halved down to a short linear scan.
    """
    n = min(len(a), len(b))
    if type(a) is not type(b):  # a tuple never equals a list: compare like with like
        a, b = tuple(a), tuple(b)
    i, step = 0, _BLOCK
    while i < n:
        j = min(i + step, n)
        if a[i:j] == b[i:j]:
            i, step = j, step * 2
            continue
        while j - i > _SCAN:  # the first difference lies in [i, j)
            m = (i + j) // 2
            if a[i:m] == b[i:m]:
                i = m
            else:
                j = m
        while a[i] == b[i]:
            i += 1
        return i
    return n
