"""From an ask's label log-probabilities (in each order it was put, with its priors) to its result.

Pure math over what the branches returned: the orders are combined and the priors divided out by
`debiasing`, the kind builds the distribution (`kinds`), and the refusal policy may decline it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import msgspec

from openjev.domain.debiasing import Order, combine_orders, divide_prior, identity
from openjev.domain.decision import Ask
from openjev.domain.example_fit import shifted
from openjev.domain.kinds import rules
from openjev.domain.outcome import Distribution, Refusal, Result
from openjev.domain.scoring_math import ConfidenceFormula


class Asked(msgspec.Struct, frozen=True):
    """One branch's reply: the order its options were shown in (() when as given) and what it read."""

    order: Order
    logprobs: Sequence[float]
    label_mass: float | None = None


def distribution(
    ask: Ask,
    asked: Sequence[Asked],
    priors: Mapping[Order, Sequence[float]],
    *,
    temperature: float = 1.0,
    confidence: ConfidenceFormula = "typesafe",
    offsets: Sequence[float] | None = None,
    arithmetic: bool = False,
) -> Distribution:
    """The ask's answer: its orders combined, its prior divided out where one was measured, then
    shifted by the `offsets` fitted on its worked examples (`example_fit`), when it has some.
    `arithmetic`: orders combined by their mean probability (`combine_orders`).
    """
    logprobs = combined(asked, priors, arithmetic=arithmetic)
    if offsets:
        logprobs = shifted(logprobs, offsets)
    answer = rules(ask).answer(logprobs, temperature=temperature, confidence=confidence)
    masses = [a.label_mass for a in asked]
    if not masses or any(m is None for m in masses):
        return answer
    return msgspec.structs.replace(answer, label_mass=math.fsum(m for m in masses if m is not None) / len(masses))


def combined(
    asked: Sequence[Asked], priors: Mapping[Order, Sequence[float]], *, arithmetic: bool = False
) -> Sequence[float]:
    """One ask's label log-probabilities by option from all its orders, each prior divided out.

    Asked once, as given and with no prior, they are as read (the kind's softmax normalises them).
    """
    if len(asked) == 1 and asked[0].order not in priors and _as_given(asked[0].order):
        return asked[0].logprobs
    return combine_orders(
        [(a.order or identity(len(a.logprobs)), _calibrated(a.logprobs, priors.get(a.order))) for a in asked],
        arithmetic=arithmetic,
    )


def _as_given(order: Order) -> bool:
    return order == identity(len(order))


def under_policy(answer: Distribution, refuse_below: float | None) -> Result:
    """The answer, or a refusal when its label mass is below the policy's threshold.

    The label mass is the share of the model's next-token probability that fell on the offered
    labels: below the threshold, the model wanted to say something else than any option.
    """
    mass = answer.label_mass
    if refuse_below is None or mass is None or mass >= refuse_below:
        return answer
    return Refusal(
        reason=f"the answer labels got {mass:.3g} of the model's next-token probability, below {refuse_below:g}",
        label_mass=mass,
    )


def _calibrated(logprobs: Sequence[float], prior: Sequence[float] | None) -> Sequence[float]:
    return logprobs if prior is None else divide_prior(logprobs, prior)
