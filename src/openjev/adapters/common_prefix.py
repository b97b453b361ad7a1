"""The longest common prefix of two token sequences: what a prompt cache can reuse.

Shared by the embedded backend's slot routing and the fake backend's made-up cache report.
"""

from __future__ import annotations

from collections.abc import Sequence

_BLOCK = 256


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, compared block by block (C speed on long prompts)."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(i + _BLOCK, n)
        if a[i:j] != b[i:j]:  # a difference in this block (or a tuple against a list): find it
            while i < j and a[i] == b[i]:
                i += 1
            if i < j:
                return i
        i = j
    return n
