"""What a backend adapter hands to the application: the backend, how to load its codec, its names.

Each adapter package has a `build_runtime(settings) -> Runtime`, registered in `openjev.backends`;
`openjev.bootstrap` picks one and starts it.
Building is cheap and synchronous (no model load, no network); the slow parts happen in
`backend.start()` and `load_codec()`, during the app's start-up while /health says 503.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from openjev.backend_spec import BackendName
from openjev.domain.debiasing import DebiasMode
from openjev.domain.own_prompt import ModelPrompt
from openjev.domain.ports import PromptCodec, ScoringBackend


@dataclass(frozen=True)
class Runtime:
    kind: BackendName  # the backend's name in `openjev.backends.BACKENDS`
    backend: ScoringBackend
    load_codec: Callable[[], PromptCodec]  # blocking; called in a worker thread after backend.start()
    public_model: str  # the model id reported in responses and /v1/models
    model_description: str
    accepted_models: frozenset[str] = field(default_factory=frozenset)  # besides public_model and jev-latest
    release_date: str | None = None  # YYYY-MM-DD of the served model, when known
    # The bias removal measured best for the served model, when known; else `bootstrap.build_runtime`
    # sets the backend's default (`BackendSpec.default_debias`).
    default_debias: DebiasMode | None = None
    default_temperature: float | None = None  # the temperature fitted for the served model, when known
    # The served model's own decision prompt (a decision GGUF), from its codec: blocking, called after
    # `load_codec`; None for openjev's layout.
    load_model_prompt: Callable[[PromptCodec], ModelPrompt] | None = None

    @property
    def model_names(self) -> frozenset[str]:
        """Every `model` a request may name, besides `jev-latest`."""
        return frozenset({self.public_model, *self.accepted_models})
