"""Generators of labelled items to tune on, each a name in `GENERATORS` (`openjev generate NAME`).

Each writes items in `openjev eval`'s format ({id, state, question, gold}) whose gold answers are
computed from what was drawn, so they are right by construction, and its output is a function of
the count, the seed and its flags only. Pure Python: they run under plain `uv run openjev`, with no
`tune` group. A new generator is a module with a `generate(count, seed, options)` and an entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from openjev.tuning.generators import decisions, priority


@dataclass(frozen=True)
class Flag:
    """An on/off option: `--NAME` on the command line, `options[NAME]` in the generator."""

    name: str
    help: str


@dataclass(frozen=True)
class Generator:
    name: str
    help: str  # one line, shown by `openjev generate --help`
    generate: Callable[[int, int, Mapping[str, bool]], Iterator[dict[str, object]]]  # count, seed, flags set or not
    flags: tuple[Flag, ...] = ()


GENERATORS: dict[str, Generator] = {
    generator.name: generator
    for generator in (
        Generator(
            "decisions",
            "six kinds of decisions under written rules (returns, claims, agent actions, moderation, "
            "bug severity, tool routing): the shipped adapter's training data",
            decisions.generate,
            (Flag("contrast", "return requests one policy at a time, one request for each answer it leads to"),),
        ),
        Generator(
            "priority",
            "support tickets whose priority follows a rule the model was never told "
            "(base urgency, +1 angry, +1 Premium, capped at Critical)",
            priority.generate,
            (
                Flag("held-out", "draw from the other half of the phrase lists: a set to measure on"),
                Flag("policy-in-question", "write the rule into each question's instructions"),
            ),
        ),
    )
}
