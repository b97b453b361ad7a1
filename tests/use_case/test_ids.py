"""Request and call ids: unique, opaque, and usable as SGLang rids as they are."""

from __future__ import annotations

import re

from openjev.adapters.sglang.wire import rid_for
from openjev.ids import random_id


def test_ids_are_unique_32_hex_digits_passed_to_sglang_unchanged() -> None:
    ids = [random_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert all(rid_for(i) == i for i in ids[:100])
