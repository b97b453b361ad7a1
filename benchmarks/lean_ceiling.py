"""How far any per-question bias removal could take a set of answers: the ceiling of fitting offsets.

Run: `uv run python benchmarks/lean_ceiling.py REPORT.json` on a report of `openjev eval … --out`.

`calibrate` and `fit` both add one log-offset per option of a question to every case's answer: they
take back a lean the model has whatever the case. However the offsets are found (a content-free state,
worked examples, more examples), they cannot do better than offsets chosen on the answers being scored
themselves, with their gold labels: a cheat that is only good as an upper bound. This prints, per
question (an eval file and its option set):

- `answered`: the items right as they came;
- `fitted here`: right under the offsets that make these items' gold answers most probable (what `fit`
  would find with every item as its own worked example; a tiny ridge keeps them finite);
- `best offsets`: right under the offsets that maximise the count of right items, found by coordinate
  ascent over the points where an item's answer changes, started from zero and from the fitted offsets.

If `best offsets` is under a target, no bias removal of this kind reaches it with this model: the
errors left are answers the model gets wrong case by case, not a lean. The bound is loose for a
question with few items per option (with one item per option, offsets can make nearly every item
right), so read it on questions that many items share.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from openjev.domain.example_fit import fit_offsets
from openjev.domain.scoring_math import argmax

Case = tuple[list[float], int]
_FLOOR = 1e-300
# The ridge of the "fitted here" offsets: small enough to leave the optimum where it is, large enough
# to keep it finite when one option's items are all answered right.
_TINY_RIDGE = 1e-4
# Offsets this far from every breakpoint are as good as infinitely far.
_BEYOND = 50.0


def right(cases: Sequence[Case], offsets: Sequence[float]) -> int:
    """How many cases' highest shifted log-probability is their gold option's."""
    return sum(
        argmax([value + offset for value, offset in zip(logs, offsets, strict=True)]) == gold for logs, gold in cases
    )


def _best_for(cases: Sequence[Case], offsets: list[float], option: int) -> tuple[int, float]:
    """The best count of right cases when only `option`'s offset moves, and an offset giving it."""
    points: list[float] = []
    for logs, _ in cases:
        rival = max(value + offsets[k] for k, value in enumerate(logs) if k != option)
        points.append(rival - logs[option])
    points.sort()
    candidates = [points[0] - _BEYOND, points[-1] + _BEYOND]
    candidates += [(a + b) / 2 for a, b in itertools.pairwise(points) if a != b]
    best = (right(cases, offsets), offsets[option])
    for value in candidates:
        trial = [*offsets[:option], value, *offsets[option + 1 :]]
        count = right(cases, trial)
        if count > best[0]:
            best = (count, value)
    return best


def best_offsets(cases: Sequence[Case], start: Sequence[float]) -> int:
    """Coordinate ascent on the count of right cases: a local optimum, so a lower bound on the best."""
    offsets = list(start)
    score = right(cases, offsets)
    improved = True
    while improved:
        improved = False
        for option in range(len(offsets)):
            count, value = _best_for(cases, offsets, option)
            if count > score:
                score, offsets[option], improved = count, value, True
    return score


def _groups(report: dict[str, object]) -> tuple[dict[tuple[str, tuple[str, ...]], list[Case]], Counter[str]]:
    """The choice items by question, and a count of the items left out, by why."""
    groups: dict[tuple[str, tuple[str, ...]], list[Case]] = defaultdict(list)
    left_out: Counter[str] = Counter()
    files = report["files"]
    assert isinstance(files, list)
    for entry in files:
        for answer in entry["answers"]:
            if "probabilities" not in answer:
                left_out["the eval did not answer (its report has the error)"] += 1
                continue
            keys = tuple(sorted(answer["probabilities"]))
            gold = str(answer["gold"])
            if gold not in keys:
                left_out["yes/no (its probabilities are keyed by the words, not the gold)"] += 1
                continue
            logs = [math.log(max(answer["probabilities"][key], _FLOOR)) for key in keys]
            groups[(Path(entry["file"]).name, keys)].append((logs, keys.index(gold)))
    return groups, left_out


def main(path: str) -> None:
    groups, left_out = _groups(json.loads(Path(path).read_text()))
    totals = [0, 0, 0, 0]
    print(f"{'file':<28} {'options':>7} {'items':>5} {'answered':>8} {'fitted here':>11} {'best offsets':>12}")
    for (name, keys), cases in sorted(groups.items()):
        fitted = fit_offsets(cases, _TINY_RIDGE)
        row = [
            len(cases),
            right(cases, [0.0] * len(keys)),
            right(cases, fitted),
            max(best_offsets(cases, [0.0] * len(keys)), best_offsets(cases, fitted)),
        ]
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        print(f"{name:<28} {len(keys):>7} {row[0]:>5} {row[1]:>8} {row[2]:>11} {row[3]:>12}")
    print(f"{'all':<28} {'':>7} {totals[0]:>5} {totals[1]:>8} {totals[2]:>11} {totals[3]:>12}")
    for why, count in sorted(left_out.items()):
        print(f"left out: {count} item{'' if count == 1 else 's'}, {why}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
