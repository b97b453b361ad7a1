"""docs/library.md's examples run as written: the core as a library, with no server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def test_every_example_of_the_library_page_runs_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 3
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # the page's own examples
    printed = capsys.readouterr().out
    assert "Which department should handle this?" in printed and "[0.9, 0.1] 0 0.8" in printed
    assert "NoulAnswer(noul=" in printed and "AnswerPredicate(name='refund', probability=" in printed
