"""How a model that brings its own decision format reads one branch's label scores (decision GGUFs).

openjev's own layout reads one token per option and tempers the softmax once, for the whole server.
A decision model was trained with its own rules, which llama.cpp's /v1/systemone applies and these
mirror: each output may be read on several tokens (the best of them counts), the softmax is tempered
by the model's own temperature for the kind and size of the question, and a rating scale can stand
for a yes/no answer (its mean, from 0 for certainly no to 1 for certainly yes). `read` turns a
branch's label log-probabilities into tempered log-probabilities by shown position, so the rest of
the answer math (orders, priors, offsets) runs on them unchanged at temperature 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from openjev.domain.debiasing import log_softmax


class Reading(msgspec.Struct, frozen=True):
    """How one branch's `label_ids` become its outputs.

    `groups`: how many consecutive label ids each output reads (the highest counts); () for one each.
    `temperature`: the model's own for this question. `ratings`: the outputs are a rating scale,
    lowest first, whose mean on [0, 1] is the probability of yes; the result is then (yes, no).
    """

    temperature: float = 1.0
    groups: tuple[int, ...] = ()
    ratings: bool = False


def read(reading: Reading, label_logprobs: Sequence[float]) -> tuple[float, ...]:
    """Tempered, normalised log-probabilities by output (by shown position), or (yes, no) for ratings."""
    outputs = _grouped(reading.groups, label_logprobs)
    tempered = log_softmax([x / reading.temperature for x in outputs])
    if not reading.ratings:
        return tuple(tempered)
    top = len(tempered) - 1
    yes = math.fsum(math.exp(x) * i / top for i, x in enumerate(tempered)) if top else 1.0
    yes = min(1.0, max(0.0, yes))
    return (_log(yes), _log(1.0 - yes))


def _grouped(groups: Sequence[int], label_logprobs: Sequence[float]) -> list[float]:
    if not groups:
        return list(label_logprobs)
    if sum(groups) != len(label_logprobs) or min(groups) < 1:
        raise ValueError(f"label groups {list(groups)} do not cover {len(label_logprobs)} label scores")
    outputs: list[float] = []
    at = 0
    for size in groups:
        outputs.append(max(label_logprobs[at : at + size]))
        at += size
    return outputs


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf
