"""The composition root: settings in, a started and verified evaluator out.

Everything that turns `Settings` into working objects happens here, once: which backend adapter
to use (`build_runtime`, from the registry `openjev.backends.BACKENDS`), the admission limits in
force (`limits_from`), and the start-up sequence (start the backend, load its codec, verify the
answer labels, check the chat template, build the `Evaluator`). The HTTP app runs
`start_evaluator` in the background while /health answers 503; tests and notebooks use `serving`:

    settings = load_settings(backend="fake")
    runtime = build_runtime(settings)
    async with serving(settings, runtime) as evaluator:
        parsed = systemone.parse(body, limits_from(settings), runtime.model_names)
        outcome = await evaluator.evaluate(evaluator.prepare(parsed.decision))
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace

from openjev.backends import BACKENDS, Backend
from openjev.domain.errors import StartupError
from openjev.domain.labels import LabelSet, TooFewLabels, verify_labels
from openjev.domain.limits import Limits
from openjev.domain.own_prompt import ModelPrompt
from openjev.domain.ports import PromptCodec
from openjev.domain.prompt import check_template
from openjev.evaluation import Evaluator, EvaluatorConfig
from openjev.prior_cache import PriorCache
from openjev.runtime import Runtime
from openjev.settings import Settings, env_name


def build_runtime(settings: Settings, backends: Mapping[str, Backend] = BACKENDS) -> Runtime:
    """The backend adapter the settings ask for (cheap and synchronous: nothing is loaded yet).

    A runtime whose model has no measured bias removal gets its backend's default here.
    """
    spec = backends[settings.resolved_backend()]
    runtime = spec.build_runtime(settings)
    return runtime if runtime.default_debias is not None else replace(runtime, default_debias=spec.default_debias)


def limits_from(settings: Settings) -> Limits:
    """The decision limits in force, from the settings."""
    return Limits(
        max_questions=settings.max_questions,
        max_options=settings.max_options,
        max_input_tokens=settings.max_input_tokens,
        max_total_input_tokens=settings.max_total_input_tokens,
        max_concurrent_branches=settings.max_concurrent_branches,
        request_timeout_seconds=settings.request_timeout,
    )


async def start_evaluator(
    settings: Settings,
    runtime: Runtime,
    *,
    limits: Limits | None = None,
    on_step: Callable[[str], None] = lambda _: None,
) -> Evaluator:
    """Start the backend, load and verify the codec, and build the evaluator; slow parts run in threads.

    Raises StartupError (or the backend's own error) when the model cannot serve. `limits`: the
    ones the caller already enforces (the HTTP app's), so that one `Limits` serves both; `on_step`
    hears what is being done next, for /health.
    """
    await runtime.backend.start()
    on_step("loading the tokenizer and verifying labels")
    codec = await asyncio.to_thread(runtime.load_codec)
    if runtime.load_model_prompt is not None:  # a decision model: its own prompt and labels, checked as it loads
        model_prompt = await asyncio.to_thread(runtime.load_model_prompt, codec)
        return build_evaluator(settings, runtime, codec, model_prompt.labels, limits, model_prompt)
    labels = await asyncio.to_thread(verified_labels, codec, settings)
    await asyncio.to_thread(check_template, codec, labels)
    return build_evaluator(settings, runtime, codec, labels, limits)


def verified_labels(codec: PromptCodec, settings: Settings) -> LabelSet:
    """The answer labels for OPENJEV_MAX_OPTIONS options; a model with fewer says which value to set."""
    try:
        return verify_labels(codec, settings.max_options)
    except TooFewLabels as exc:
        variable = env_name("max_options")
        raise StartupError(
            f"the model's tokenizer supports only {exc.supported} single-token answer labels, but "
            f"{variable}={exc.wanted} needs {exc.wanted}: set {variable} to {exc.supported} or less"
        ) from None


def build_evaluator(
    settings: Settings,
    runtime: Runtime,
    codec: PromptCodec,
    labels: LabelSet,
    limits: Limits | None = None,
    model_prompt: ModelPrompt | None = None,
) -> Evaluator:
    """The one place where settings become the evaluator's arguments."""
    config = EvaluatorConfig(
        limits=limits if limits is not None else limits_from(settings),
        temperature=settings.resolved_temperature(runtime.default_temperature),
        confidence=settings.confidence,
        debias=settings.resolved_debias(runtime.default_debias),
        max_orders=settings.debias_max_orders,
        refuse_below=settings.refuse_below_label_mass,
        client_debias=settings.client_debias_modes(),
        branch_context=runtime.backend.context_tokens(),
        date_facts=settings.date_facts,
    )
    return Evaluator(
        backend=runtime.backend,
        codec=codec,
        labels=labels,
        config=config,
        priors=PriorCache(settings.prior_cache_entries),
        model_prompt=model_prompt,
    )


@asynccontextmanager
async def serving(settings: Settings, runtime: Runtime | None = None) -> AsyncIterator[Evaluator]:
    """A started evaluator for the length of the block; its backend is closed afterwards."""
    runtime = runtime or build_runtime(settings)
    try:
        yield await start_evaluator(settings, runtime)
    finally:
        await runtime.backend.close()
