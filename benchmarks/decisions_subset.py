"""Write the fixed stratified subset of the realistic-decision dev set that every comparison uses.

Run: `uv run python benchmarks/decisions_subset.py OUT_DIR` (writes one file per kind into OUT_DIR),
then `uv run openjev eval OUT_DIR/*.jsonl --reverse`.

Why a subset: on 2 cores the default model takes seconds per item and `--reverse` doubles it, so the
whole set (297 items) is too slow to measure every change on. The rule looks only at each file's
length and item order, never at answers: every item of a file with at most 6 items, every 7th item
(0, 7, 14, …) of a file with at most 24, every 11th of a larger one. Files list templates in order
and each template's items in option order, so a step that is prime to the option counts spreads the
sample over templates and over the position of the gold option (46 items over the 8 kinds).
"""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = Path(__file__).parent / "quality-dev" / "decisions"


def step(count: int) -> int:
    """Take every `step`-th item of a file of `count` items."""
    return 1 if count <= 6 else 7 if count <= 24 else 11


def subset(lines: list[str]) -> list[str]:
    return lines[:: step(len(lines))]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: decisions_subset.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for path in sorted(SOURCE.glob("*.jsonl")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        chosen = subset(lines)
        (out / path.name).write_text("".join(line + "\n" for line in chosen), encoding="utf-8")
        total += len(chosen)
        print(f"{path.name}: {len(chosen)} of {len(lines)}")
    print(f"{total} items in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
