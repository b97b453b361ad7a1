"""The use case: decision → plan → warm the prefix → branches → outcome (docs/prompt-format.md).

Depends only on the domain and its ports, and knows no wire format: every contract hands it a
`Decision` and turns its `Outcome` into a response. `prepare` plans (pure: `evaluation_plan`);
`evaluate` runs the plan: it prefills the shared prefix, then sends every branch (and every prior
the cache lacks) to the backend in one `score_many` batch, under a process-wide limit on backend
calls that counts each branch of a batch as one call (`backend_calls`). The first failure, the
deadline or a cancelled caller cancels every sibling and asks the backend to abort every call
still in flight. Bias removal (docs/quality.md) only changes which branches run, one per option
order and per uncached prior, and how their distributions combine (`openjev.domain.debiasing`);
backends never know. The refusal policy declines an ask whose label mass falls below its
threshold, only for contracts that can express a refusal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from openjev.backend_calls import BackendCalls
from openjev.call_limit import CallLimit
from openjev.domain.debiasing import DebiasMode
from openjev.domain.decision import Decision
from openjev.domain.errors import BackendTimeout, first_error
from openjev.domain.labels import LabelSet
from openjev.domain.limits import Limits
from openjev.domain.outcome import Outcome, Timings, Work
from openjev.domain.own_prompt import ModelPrompt
from openjev.domain.ports import CallUsage, LabelScores, PromptCodec, ScoringBackend
from openjev.domain.validation import validate_vocabulary
from openjev.evaluation_plan import (
    EvaluatorConfig,
    Logprobs,
    MissingPrior,
    Prepared,
    PriorSlot,
    branch_requests,
    plan,
    results,
)
from openjev.ids import random_id
from openjev.prior_cache import PriorCache, prior_key

__all__ = ["Evaluator", "EvaluatorConfig", "Prepared"]


class Evaluator:
    """Answers decisions with one backend; shared by every request of the process.

    `config` is built once from the settings (`bootstrap`); tests and notebooks may give its fields
    as keywords instead (`Evaluator(backend=..., codec=..., labels=..., limits=..., debias="rotate")`).
    `model_prompt`: the served model's own decision prompt (a decision GGUF), in place of openjev's layout.
    """

    def __init__(
        self,
        *,
        backend: ScoringBackend,
        codec: PromptCodec,
        labels: LabelSet,
        config: EvaluatorConfig | None = None,
        priors: PriorCache | None = None,
        model_prompt: ModelPrompt | None = None,
        new_call_id: Callable[[], str] = random_id,
        clock: Callable[[], float] = time.perf_counter,
        **config_fields: Any,
    ) -> None:
        self._config = config if config is not None else EvaluatorConfig(**config_fields)
        self._codec = codec
        self._labels = labels
        self._model_prompt = model_prompt
        self._priors = priors if priors is not None else PriorCache()
        self._clock = clock
        self._calls = BackendCalls(backend, CallLimit(self._config.limits.max_concurrent_branches), new_call_id)

    @property
    def config(self) -> EvaluatorConfig:
        return self._config

    @property
    def limits(self) -> Limits:
        return self._config.limits

    @property
    def branch_limit(self) -> int:
        return self._config.branch_limit

    @property
    def debias(self) -> DebiasMode:
        return self._config.debias

    @property
    def labels(self) -> LabelSet:
        return self._labels

    @property
    def codec(self) -> PromptCodec:
        return self._codec

    @property
    def model_prompt(self) -> ModelPrompt | None:
        return self._model_prompt

    @property
    def prompt_format(self) -> str:
        """What writes the prompts: openjev's layout, or the served decision model's own prompt."""
        if self._model_prompt is None:
            return "openjev's layout (docs/prompt-format.md)"
        return self._model_prompt.description

    def prepare(self, decision: Decision) -> Prepared:
        """Build and check the prompt plan (CPU only). Raises InvalidRequest before any inference."""
        prepared = plan(decision, self._codec, self._labels, self._config, self._model_prompt)
        vocab_size = self._calls.backend.vocab_size()
        validate_vocabulary(prepared.plan, decision, vocab_size)
        for _, extra in prepared.measured():
            validate_vocabulary(extra, decision, vocab_size)
        return prepared

    async def evaluate(self, prepared: Prepared) -> Outcome:
        """Run a prepared decision under the request deadline; on any failure, abort what is in flight."""
        in_flight: set[str] = set()
        timeout = self._config.limits.request_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                return await self._run(prepared, in_flight)
        except TimeoutError:
            await self._calls.abort(in_flight)
            raise BackendTimeout(f"the backend did not answer within {timeout:g} s") from None
        except BaseExceptionGroup as group:
            await self._calls.abort(in_flight)
            raise first_error(group) from None
        except BaseException:
            await self._calls.abort(in_flight)
            raise

    async def _run(self, prepared: Prepared, in_flight: set[str]) -> Outcome:
        """Warm the prefix, score every branch and missing prior, keep the new priors, combine."""
        branches = prepared.plan.branches
        priors, missing = self._cached_priors(prepared)
        hits = len(priors)
        start = self._clock()
        prefix, head = list(prepared.plan.prefix_ids), prepared.plan.head_tokens
        # The worked examples' start first, on its own, so that a backend keeping prefixes continues
        # from it: every request sending the same examples then computes them once.
        warms = [await self._calls.warm(in_flight, prefix[:head])] if head else []
        warms.append(await self._calls.warm(in_flight, prefix))
        warmed = self._clock()
        scores = await self._calls.score_all(in_flight, branch_requests(prepared, missing))
        done = self._clock()
        branch_scores, prior_scores = scores[: len(branches)], scores[len(branches) :]
        for prior, score in zip(missing, prior_scores, strict=True):
            self._priors.put(prior.key, score.logprobs)
            priors[prior.slot] = score.logprobs
        answers = (prepared.decision, branches, branch_scores, priors, self._config)
        # Fitting offsets on many examples of many options takes a while (0.2 s for 32 examples of
        # 64 options): off the event loop, so that other requests go on meanwhile.
        found = await asyncio.to_thread(results, *answers) if prepared.example_plans else results(*answers)
        return Outcome(
            results=found,
            work=_work(prepared, warms, scores, hits),
            timings=Timings(prefill=warmed - start, branches=done - warmed),
        )

    def _cached_priors(self, prepared: Prepared) -> tuple[dict[PriorSlot, Logprobs], list[MissingPrior]]:
        """The priors (content-free, or on worked examples) the cache holds, by slot, and the ones still to measure.

        An answer on a worked example depends only on the model and its exact prompt, like a prior, so
        requests sending the same examples with the same question pay for them once.
        """
        found: dict[PriorSlot, Logprobs] = {}
        missing: list[MissingPrior] = []
        for example, measured in prepared.measured():
            for branch in measured.branches:
                slot = PriorSlot(branch.ask, branch.order, example)
                token_ids = [*measured.prefix_ids, *branch.suffix_ids]
                key = prior_key(token_ids, branch.label_ids)
                cached = self._priors.get(key)
                if cached is None:
                    missing.append(MissingPrior(key, slot, branch, token_ids))
                else:
                    found[slot] = cached
        return found, missing


def _work(prepared: Prepared, warms: list[CallUsage], scores: list[LabelScores], prior_hits: int) -> Work:
    """What the backend did: the warm-ups (the examples' start, the prefix) and every scored call."""
    warm_cached = [w.cached_tokens for w in warms]
    return Work(
        calls=len(scores) + len(warms),
        input_tokens=sum(w.prompt_tokens for w in warms) + sum(s.usage.prompt_tokens for s in scores),
        prefix_tokens=len(prepared.plan.prefix_ids),
        warm_prompt_tokens=sum(w.prompt_tokens for w in warms),
        warm_cached_tokens=None if None in warm_cached else sum(c or 0 for c in warm_cached),
        branch_cached_tokens=_cached(scores),
        debias_calls=len(scores) - len(prepared.decision.asks),
        prior_hits=prior_hits,
    )


def _cached(scores: list[LabelScores]) -> int | None:
    reported: list[CallUsage] = [s.usage for s in scores]
    if any(u.cached_tokens is None for u in reported):
        return None
    return sum(u.cached_tokens or 0 for u in reported)
