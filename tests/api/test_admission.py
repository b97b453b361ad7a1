from __future__ import annotations

import pytest

from openjev.domain.errors import Overloaded
from openjev.http.admission import Admission


def test_admission_refuses_past_the_limit_and_frees_slots() -> None:
    admission = Admission(limit=2, retry_after=3)
    with admission.slot(), admission.slot():
        with pytest.raises(Overloaded) as info, admission.slot():
            pass
        assert info.value.retry_after == 3
        assert admission.active == 2
    assert admission.active == 0
    with admission.slot():
        assert admission.active == 1


def test_a_failing_evaluation_releases_its_slot() -> None:
    admission = Admission(limit=1)
    with pytest.raises(RuntimeError), admission.slot():
        raise RuntimeError("backend failed")
    with admission.slot():
        assert admission.active == 1
