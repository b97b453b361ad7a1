"""The use case's pure half: what a decision asks of the backend, and how its scores become results.

`plan` turns a decision into a `Prepared`: the prompt plan (the shared prefix and one branch per
ask and option order), checked against the limits, and the plans of the answer priors bias removal
needs (the calibrated asks on a content-free state; for `fit`, each ask on each of its worked
examples). `branch_requests` lists the single-token calls a prepared decision makes after its
warm-up; `results` combines their scores, per ask, into the answers. No I/O here: running the calls
is `backend_calls`, holding the priors `prior_cache`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from openjev.domain.answers import Asked, combined, distribution, under_policy
from openjev.domain.debiasing import DebiasMode, DebiasPolicy, Order, log_softmax, option_orders
from openjev.domain.decision import Ask, Decision, State
from openjev.domain.errors import InvalidRequest, echo
from openjev.domain.example_fit import fit_offsets
from openjev.domain.kinds import rules
from openjev.domain.labels import LabelSet
from openjev.domain.limits import Limits
from openjev.domain.outcome import Result
from openjev.domain.own_prompt import ModelPrompt, build_own_plan, own_floors
from openjev.domain.ports import LabelScores, PromptCodec
from openjev.domain.prompt import Branch, PromptPlan, build_plan, prompt_text, token_floors
from openjev.domain.reading import Reading, read
from openjev.domain.scoring_math import ConfidenceFormula
from openjev.domain.state import content_free
from openjev.domain.validation import validate_token_floor, validate_tokens

Logprobs = tuple[float, ...]
"""An option's label log-probabilities, in the ask's option order."""


class EvaluatorConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How the server answers, as the settings say (built once by `bootstrap`).

    `branch_context`: the backend's context in tokens, when it has one smaller than the limits'.
    """

    limits: Limits = Limits()
    temperature: float = 1.0
    confidence: ConfidenceFormula = "typesafe"
    debias: DebiasMode = "none"
    max_orders: int = 10
    refuse_below: float | None = None
    client_debias: frozenset[DebiasMode] | None = None  # the modes x_debias may choose (None: any)
    branch_context: int | None = None
    date_facts: bool = True  # add computed day counts when the texts name two or more dates

    @property
    def branch_limit(self) -> int:
        """The most tokens one branch may have: the input limit, or the backend's context if smaller."""
        return min(self.limits.max_input_tokens, self.branch_context or self.limits.max_input_tokens)


class Prepared(msgspec.Struct, frozen=True):
    """A decision with its checked prompt plan, ready to run."""

    decision: Decision
    plan: PromptPlan
    prior_plan: PromptPlan | None = None  # the calibrated asks on a content-free state (each branch: one prior)
    label_mass: bool = False  # measure each branch's label mass (asked for, or the refusal policy needs it)
    example_plans: tuple[ExamplePlan, ...] = ()  # `fit`: each worked example asked like the case

    @property
    def priors(self) -> PromptPlan | None:
        """The plan of the priors (the name the golden prompt tests read)."""
        return self.prior_plan

    def measured(self) -> list[tuple[int | None, PromptPlan]]:
        """The plans besides the case's, by the example they are on (None: the content-free priors')."""
        prior: list[tuple[int | None, PromptPlan]] = [(None, self.prior_plan)] if self.prior_plan is not None else []
        return prior + [(e.example, e.plan) for e in self.example_plans]


class ExamplePlan(msgspec.Struct, frozen=True):
    """A worked example asked like the case, to fit its ask's offsets: which ask and example, the plan."""

    ask: int
    example: int
    plan: PromptPlan


class PriorSlot(msgspec.Struct, frozen=True):
    """Which prior: the ask (by position), the option order it was measured in, and the state:
    the content-free one (`example` None) or the ask's worked example of that index (`fit`)."""

    ask: int
    order: Order
    example: int | None = None


class BranchRequest(msgspec.Struct, frozen=True):
    """One single-token call to make: the whole prompt's ids, the label ids to score, whether to measure label mass."""

    token_ids: list[int]
    label_ids: tuple[int, ...]
    label_mass: bool


class MissingPrior(msgspec.Struct, frozen=True):
    """A prior the cache lacks: its cache key, its slot, its branch in its plan, and its prompt's ids."""

    key: bytes
    slot: PriorSlot
    branch: Branch
    token_ids: list[int]


def plan(
    decision: Decision,
    codec: PromptCodec,
    labels: LabelSet,
    config: EvaluatorConfig,
    model_prompt: ModelPrompt | None = None,
) -> Prepared:
    """Build and check the prompt plan (CPU only). Raises InvalidRequest before any inference.

    `model_prompt`: the served model's own decision prompt (a decision GGUF), in place of openjev's layout.
    """
    check_client_debias(decision, config)
    policy = DebiasPolicy.of(decision.policy.debias or config.debias, config.max_orders)
    if model_prompt is not None:
        return _plan_own(decision, codec, model_prompt, policy, config)

    def orders(ask: Ask) -> tuple[Order, ...]:
        if policy.rotate and rules(ask).rotatable:
            return option_orders(len(ask.options), policy.max_orders)
        return ((),)

    calibrated = [i for i, ask in enumerate(decision.asks) if policy.calibrate and rules(ask).calibratable]
    # With `fit`, the examples are asked about on their own instead of being shown before the state.
    shown = tuple(msgspec.structs.replace(a, examples=()) for a in decision.asks) if policy.fit else decision.asks
    # What cannot fit is refused from the byte counts, before tokenizing (seconds for a large state),
    # every call bias removal adds counted (a worked example's own calls are checked once tokenized).
    text = prompt_text(decision.state, shown, labels, dates=config.date_facts)
    prefix_floor, ask_floors = token_floors(text, codec)
    counts = [len(orders(ask)) for ask in shown]
    calls = [(n, n if i in calibrated else 0) for i, n in enumerate(counts)]
    validate_token_floor(prefix_floor, ask_floors, decision, config.limits, config.branch_limit, calls)
    prompt = build_plan(decision.state, shown, codec, labels, orders, text, decision.state_where)
    empty = content_free(decision.state)
    prior_plan = _on_state(empty, calibrated, shown, codec, labels, orders, config) if calibrated else None
    examples = tuple(
        ExamplePlan(i, j, _on_state(example.state, [i], shown, codec, labels, orders, config))
        for i, ask in enumerate(decision.asks)
        if policy.fit
        for j, example in enumerate(ask.examples)
    )
    validate_tokens(prompt, decision, config.limits, config.branch_limit, prior_plan, [e.plan for e in examples])
    refusing = decision.policy.refusals and config.refuse_below is not None
    return Prepared(
        decision=decision,
        plan=prompt,
        prior_plan=prior_plan,
        label_mass=decision.policy.label_mass or refusing,
        example_plans=examples,
    )


def _on_state(
    state: State,
    indices: Sequence[int],
    asks: Sequence[Ask],
    codec: PromptCodec,
    labels: LabelSet,
    orders: Callable[[Ask], Sequence[Order]],
    config: EvaluatorConfig,
) -> PromptPlan:
    """The asks at `indices` on another state, in the case's orders, their branches still naming them by
    their index in the decision: the content-free priors' calls, or a worked example's."""
    alone = build_plan(state, [asks[i] for i in indices], codec, labels, orders, dates=config.date_facts)
    return PromptPlan(alone.prefix_ids, tuple(msgspec.structs.replace(b, ask=indices[b.ask]) for b in alone.branches))


def _plan_own(
    decision: Decision, codec: PromptCodec, prompt: ModelPrompt, policy: DebiasPolicy, config: EvaluatorConfig
) -> Prepared:
    """`plan` for a model with its own decision prompt: each ask whole, in the model's own orders (or
    the rotations bias removal asks for); no date facts, and worked examples only with `fit`, since
    the model's template has no place for either."""
    shown = [a for a in decision.asks if a.examples]
    if shown and not policy.fit:
        raise InvalidRequest.one(
            shown[0].where,
            "this decision model's own prompt has no place for worked examples: send them with x_debias "
            "fit, reverse+fit or rotate+fit, which fits them instead of showing them",
            "examples_not_shown",
        )

    def orders(ask: Ask) -> tuple[Order, ...]:
        if policy.rotate and rules(ask).rotatable:
            return option_orders(len(ask.options), policy.max_orders)
        return prompt.orders(ask)

    calibrated = [i for i, ask in enumerate(decision.asks) if policy.calibrate and rules(ask).calibratable]
    prefix_floor, ask_floors = own_floors(decision.state, decision.asks, codec)
    calls = [(len(orders(a)), len(orders(a)) if i in calibrated else 0) for i, a in enumerate(decision.asks)]
    validate_token_floor(prefix_floor, ask_floors, decision, config.limits, config.branch_limit, calls)
    asks = decision.asks
    prompt_plan = build_own_plan(decision.state, asks, prompt, orders, decision.state_where)

    def on_state(state: State, indices: Sequence[int]) -> PromptPlan:
        alone = build_own_plan(state, [asks[i] for i in indices], prompt, orders, decision.state_where)
        return PromptPlan(
            alone.prefix_ids, tuple(msgspec.structs.replace(b, ask=indices[b.ask]) for b in alone.branches)
        )

    prior_plan = on_state(content_free(decision.state), calibrated) if calibrated else None
    examples = tuple(
        ExamplePlan(i, j, on_state(example.state, [i]))
        for i, ask in enumerate(asks)
        if policy.fit
        for j, example in enumerate(ask.examples)
    )
    validate_tokens(prompt_plan, decision, config.limits, config.branch_limit, prior_plan, [e.plan for e in examples])
    return Prepared(
        decision=decision,
        plan=prompt_plan,
        prior_plan=prior_plan,
        label_mass=decision.policy.label_mass or (decision.policy.refusals and config.refuse_below is not None),
        example_plans=examples,
    )


def check_client_debias(decision: Decision, config: EvaluatorConfig) -> None:
    """A request may choose its bias removal only among the modes the operator allows."""
    asked, allowed = decision.policy.debias, config.client_debias
    if asked is None or asked == config.debias or allowed is None or asked in allowed:
        return
    names = ", ".join(sorted({config.debias, *allowed}))
    raise InvalidRequest.one(
        (*decision.root, "x_debias"),
        f"x_debias {echo(asked)} is not allowed on this server (its operator's OPENJEV_CLIENT_DEBIAS): "
        f"send one of {names}, or leave x_debias out for the server's {config.debias!r}",
        "debias_not_allowed",
    )


def branch_requests(prepared: Prepared, missing: Sequence[MissingPrior]) -> list[BranchRequest]:
    """The calls after the warm-up: every branch on the shared prefix, then every prior the cache lacks."""
    prefix = list(prepared.plan.prefix_ids)
    wanted = [
        BranchRequest(prefix + list(b.suffix_ids), b.label_ids, prepared.label_mass) for b in prepared.plan.branches
    ]
    wanted += [BranchRequest(prior.token_ids, prior.branch.label_ids, False) for prior in missing]
    return wanted


def results(
    decision: Decision,
    branches: Sequence[Branch],
    scores: Sequence[LabelScores],
    priors: dict[PriorSlot, Logprobs],
    config: EvaluatorConfig,
) -> tuple[Result, ...]:
    """One result per ask: its orders combined, its prior divided out or its offsets fitted on its
    worked examples added, under the refusal policy."""
    asked: list[list[Asked]] = [[] for _ in decision.asks]
    readings = {(b.ask, b.order): b.reading for b in branches if b.reading is not None}
    for branch, score in zip(branches, scores, strict=True):
        asked[branch.ask].append(Asked(branch.order, _read(branch.reading, score.logprobs), score.label_mass))
    priors_by_ask: list[dict[Order, Logprobs]] = [{} for _ in decision.asks]
    on_examples: dict[tuple[int, int], list[Asked]] = {}
    for slot, raw in priors.items():
        logprobs = _read(readings.get((slot.ask, slot.order)), raw)
        if slot.example is None:
            priors_by_ask[slot.ask][slot.order] = logprobs
        else:
            on_examples.setdefault((slot.ask, slot.example), []).append(Asked(slot.order, logprobs))
    refuse_below = config.refuse_below if decision.policy.refusals else None
    answers = (
        distribution(
            ask,
            asked[i],
            priors_by_ask[i],
            temperature=config.temperature,
            confidence=config.confidence,
            offsets=_offsets(ask, [on_examples.get((i, j), []) for j in range(len(ask.examples))]),
            arithmetic=bool(readings),
        )
        for i, ask in enumerate(decision.asks)
    )
    return tuple(under_policy(answer, refuse_below) for answer in answers)


def _read(reading: Reading | None, logprobs: Logprobs) -> Logprobs:
    """A branch's label log-probabilities as its answer reads them (a model's own reading, if it has one)."""
    return logprobs if reading is None else read(reading, logprobs)


def _offsets(ask: Ask, on_examples: list[list[Asked]]) -> list[float] | None:
    """The offsets fitted on the ask's worked examples (`fit`), or None when they were not asked about."""
    if not on_examples or not all(on_examples):
        return None
    answers = [example.answer for example in ask.examples]
    return fit_offsets([(log_softmax(combined(asked, {})), answers[j]) for j, asked in enumerate(on_examples)])
