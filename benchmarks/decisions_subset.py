"""Write the fixed stratified samples of the realistic-decision dev set that every comparison uses.

Run: `uv run python benchmarks/decisions_subset.py OUT_DIR [tune|check|check2|shared]` (writes one file per
kind into OUT_DIR), then `uv run openjev eval OUT_DIR/*.jsonl --reverse`.

Why samples: on 2 cores the default model takes seconds per item and `--reverse` doubles it, so the
whole set (297 items) is too slow to measure every change on. The rules look only at each file's
length and item order, never at answers:

- `tune` (the default, 46 items over the 8 kinds): every item of a file with at most 6 items, every
  7th item (0, 7, 14, …) of a file with at most 24, every 11th of a larger one. Files list templates
  in order and each template's items in option order, so a step that is prime to the option counts
  spreads the sample over templates and over the position of the gold option.
- `check` (28 items): the same steps from half a step in (3, 10, … and 5, 16, …), in the files
  larger than 6 items: items no choice was tuned on.
- `check2` (36 items, the kinds with written rules and the tickets): every 4th return request from
  the 3rd, every moderation post, every other ticket from the 2nd, without the items of `tune` and
  `check`.
- `shared` (82 items: action review, returns, tickets): every item whose question (instructions and
  options) more than one template asks, seen as more items asking it than it has options. Only these
  can be given a worked example of every option, their own answer's included, from another case:
  `openjev eval OUT_DIR/*.jsonl --examples --examples-apart '^(.*-t[0-9]+)-'`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

SOURCE = Path(__file__).parent / "quality-dev" / "decisions"
SAMPLES = ("tune", "check", "check2", "shared")
CHECK2 = {"returns_policy.jsonl": (2, 4), "content_moderation.jsonl": (0, 1), "ticket_triage.jsonl": (1, 2)}


def step(count: int) -> int:
    """Take every `step`-th item of a file of `count` items."""
    return 1 if count <= 6 else 7 if count <= 24 else 11


def subset(lines: list[str]) -> list[str]:
    return lines[:: step(len(lines))]


def check(lines: list[str]) -> list[str]:
    """The `tune` steps from half a step in; nothing from the small files (`tune` takes them whole)."""
    if len(lines) <= 6:
        return []
    every = step(len(lines))
    return lines[every // 2 :: every]


def check2(name: str, lines: list[str]) -> list[str]:
    if name not in CHECK2:
        return []
    start, every = CHECK2[name]
    taken = {_id(line) for line in [*subset(lines), *check(lines)]}
    return [line for line in lines[start::every] if _id(line) not in taken]


def shared(lines: list[str]) -> list[str]:
    """The items whose question is asked by more items than it has options: by several templates."""
    questions = [_question(line) for line in lines]
    asked = Counter(question for question, _ in questions)
    return [line for line, (question, options) in zip(lines, questions, strict=True) if asked[question] > options]


def _question(line: str) -> tuple[str, int]:
    question = json.loads(line)["question"]
    return json.dumps([question.get("instructions"), question["criteria"]], sort_keys=True), len(question["criteria"])


def _id(line: str) -> str:
    return str(json.loads(line)["id"])


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] not in SAMPLES):
        print(f"usage: decisions_subset.py OUT_DIR [{'|'.join(SAMPLES)}]", file=sys.stderr)
        return 2
    out, sample = Path(argv[0]), argv[1] if len(argv) == 2 else "tune"
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for path in sorted(SOURCE.glob("*.jsonl")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if sample == "check2":
            chosen = check2(path.name, lines)
        else:
            chosen = {"tune": subset, "check": check, "shared": shared}[sample](lines)
        if not chosen:
            continue
        (out / path.name).write_text("".join(line + "\n" for line in chosen), encoding="utf-8")
        total += len(chosen)
        print(f"{path.name}: {len(chosen)} of {len(lines)}")
    print(f"{total} items in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
