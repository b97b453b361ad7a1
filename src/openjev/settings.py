"""One typed settings object, read from OPENJEV_* once at start-up and passed down.

Nothing else in openjev reads the environment. A bad value raises SettingsError naming the variable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import msgspec

from openjev.backend_settings import (
    SGLANG_DEFAULT_MODEL,
    SGLANG_DEFAULT_PUBLIC_NAME,
    SGLANG_DEFAULT_REVISION,
    EmbeddedSettings,
    FakeSettings,
    Positive,
    PositiveFloat,
    SGLangSettings,
)
from openjev.backend_spec import BUILT_IN_BACKENDS, BackendName, BackendSpec
from openjev.contracts.decoding import explain_validation_error
from openjev.domain.debiasing import DEBIAS_MODES, DebiasMode
from openjev.domain.errors import SettingsError
from openjev.domain.limits import Limits
from openjev.http.limits import AdmissionLimits

PREFIX = "OPENJEV_"
# Read by modal_app.py on the deploying machine, never by the server: tolerated, not a typo.
DEPLOYMENT_VARIABLES = frozenset({"OPENJEV_MIN_CONTAINERS", "OPENJEV_MAX_CONTAINERS", "OPENJEV_API_KEY_SECRET"})
MAX_OPTION_LIMIT = 255
SECRET_FIELDS = ("api_key", "backend_api_key")  # stripped of surrounding white space, like a presented key
_LIMITS = Limits()  # the decision limits' defaults are the domain's
_ADMISSION = AdmissionLimits()  # the HTTP layer's


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting and its default (docs/settings.md). Field `x` is read from `OPENJEV_X`."""

    # Model and backend choice.
    backend: str = "auto"  # "auto" or a backend's name (`openjev.backend_spec`; checked by `load_settings`)
    model: str | None = None  # SGLang: HF id or path (default SGLANG_DEFAULT_MODEL); embedded: GGUF path/name/hf:.
    served_model_name: str | None = None  # public model id; default: the model's real name.
    revision: str | None = None  # SGLang's default model: SGLANG_DEFAULT_REVISION unless set (`sglang_revision`).
    tokenizer: str | None = None  # local dir with tokenizer.json (+ tokenizer_config.json) or an HF id.
    context_length: Positive | None = None  # the backend's context (SGLang's --context-length; the fake's too)
    # The served model's adapter; the served model is named `<model>+<adapter name>`. Embedded: a
    # folder `openjev tune` wrote, merged into the model at start-up (docs/tuning.md). SGLang: the
    # name of a LoRA adapter SGLang serves (`--lora-paths NAME=PATH`), sent as `lora_path` (docs/sglang.md).
    adapter: str | None = None

    # HTTP server.
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    api_key: str | None = None
    metrics_public: bool = False  # serve GET /metrics without the API key (a scraper on a private network)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # Limits (per API process): `openjev.bootstrap.limits_from` and `openjev.http.lifecycle` read them.
    max_questions: Positive = _LIMITS.max_questions
    max_options: Annotated[int, msgspec.Meta(ge=2, le=MAX_OPTION_LIMIT)] = _LIMITS.max_options
    max_body_bytes: Positive = _ADMISSION.max_body_bytes
    max_input_tokens: Positive = _LIMITS.max_input_tokens
    max_total_input_tokens: Positive = _LIMITS.max_total_input_tokens
    max_concurrent_requests: Positive = _ADMISSION.max_concurrent_requests
    max_concurrent_branches: Positive = _LIMITS.max_concurrent_branches
    request_timeout: PositiveFloat = _LIMITS.request_timeout_seconds
    # Reading a request body: the whole body within `body_timeout` seconds and, after the first
    # seconds, at `body_min_rate` bytes a second on average (0: no minimum); else 408.
    body_timeout: PositiveFloat = 30.0
    body_min_rate: Annotated[int, msgspec.Meta(ge=0)] = 1024
    # After SIGTERM, seconds the worker gets to finish in-flight requests and stop its backend; then
    # it is killed. Granian would otherwise wait for it forever, its port already closed.
    shutdown_timeout: Annotated[int, msgspec.Meta(ge=1, le=1800)] = 30

    # Answers.
    temperature: PositiveFloat | None = None  # default: the served model's (`resolved_temperature`), else 1
    confidence: Literal["entropy", "typesafe"] = "typesafe"
    debias: DebiasMode | None = None  # default: the served model's, else the backend's (`BackendSpec.default_debias`)
    debias_max_orders: Annotated[int, msgspec.Meta(ge=1, le=64)] = 10  # option orders per choice question
    # The bias removal modes a request's `x_debias` may choose, comma-separated, besides the server's
    # own (`server`: only that one). Default: any. Rotation multiplies backend calls by up to 2n.
    client_debias: str | None = None
    prior_cache_entries: Annotated[int, msgspec.Meta(ge=0)] = 4096  # answer priors kept (LRU)
    # Refuse (Decisions only: System One has no refusal) a question whose answer labels got less than
    # this share of the model's next-token probability. Off by default: every question is answered.
    refuse_below_label_mass: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    # Add one labelled line of computed day counts when the state or a question names two or more
    # calendar dates (docs/prompt-format.md#date-facts); measured to help (docs/quality.md).
    date_facts: bool = True
    # Bit-identical answers whatever else runs beside a question (docs/quality.md#reproducible-answers).
    # Default: on for the embedded backend, off for SGLang (whose cost must be measured on a GPU).
    deterministic: bool | None = None
    # More names a request's `model` may use, comma-separated (e.g. `gpt-6-luna` for code written
    # against OpenAI); listed in GET /v1/models beside the served model and `jev-latest`.
    model_aliases: str | None = None

    # Each backend's own settings (`openjev.backend_settings`), read from OPENJEV_* like the above.
    embedded: EmbeddedSettings = msgspec.field(default_factory=EmbeddedSettings)
    sglang: SGLangSettings = msgspec.field(default_factory=SGLangSettings)
    fake: FakeSettings = msgspec.field(default_factory=FakeSettings)

    def resolved_debias(
        self, model_default: DebiasMode | None = None, backends: Mapping[str, BackendSpec] = BUILT_IN_BACKENDS
    ) -> DebiasMode:
        """OPENJEV_DEBIAS, else the default measured for the served model, else the backend's."""
        if self.debias is not None:
            return self.debias
        return model_default if model_default is not None else backends[self.resolved_backend()].default_debias

    def resolved_temperature(self, model_default: float | None = None) -> float:
        """OPENJEV_TEMPERATURE, else the temperature fitted for the served model, else 1 (the logits as they are)."""
        if self.temperature is not None:
            return self.temperature
        return model_default if model_default is not None else 1.0

    def client_debias_modes(self) -> frozenset[DebiasMode] | None:
        """OPENJEV_CLIENT_DEBIAS as modes (empty for `server`: none beyond the server's own); None: any."""
        if self.client_debias is None:
            return None
        names = {name.strip() for name in self.client_debias.split(",")} - {"", "server"}
        return frozenset(cast(DebiasMode, name) for name in DEBIAS_MODES if name in names)

    def aliases(self) -> tuple[str, ...]:
        """OPENJEV_MODEL_ALIASES as names, in the order given, without blanks or repeats."""
        names = (name.strip() for name in (self.model_aliases or "").split(","))
        return tuple(dict.fromkeys(name for name in names if name))

    def sglang_revision(self) -> str | None:
        """The checkpoint revision SGLang and the tokenizer load: OPENJEV_REVISION, else the pinned
        SGLANG_DEFAULT_REVISION for the default model, else none (the repository's default branch)."""
        if self.revision:
            return self.revision
        return SGLANG_DEFAULT_REVISION if self.model in (None, SGLANG_DEFAULT_MODEL) else None

    def resolved_backend(self) -> str:
        """`auto` means SGLang when one is configured (connect URL or SGLang python), else embedded."""
        if self.backend != "auto":
            return self.backend
        auto: BackendName = "sglang" if (self.sglang.sglang_url or self.sglang.sglang_python) else "embedded"
        return auto


def env_name(field: str) -> str:
    return PREFIX + field.upper()


def _sections() -> dict[str, type[msgspec.Struct]]:
    """The fields of `Settings` that are a backend's section, with their types."""
    return {
        f.name: f.type
        for f in msgspec.structs.fields(Settings)
        if isinstance(f.type, type) and issubclass(f.type, msgspec.Struct)
    }


def setting_names() -> Iterator[tuple[str | None, str]]:
    """Every setting as (its section, or None at the top level; its name): `name` is read from OPENJEV_NAME."""
    sections = _sections()
    for field in msgspec.structs.fields(Settings):
        if field.name in sections:
            yield from ((field.name, inner.name) for inner in msgspec.structs.fields(sections[field.name]))
        else:
            yield None, field.name


def load_settings(
    environ: Mapping[str, str] | None = None,
    *,
    backends: Mapping[str, BackendSpec] = BUILT_IN_BACKENDS,
    **overrides: Any,
) -> Settings:
    """Settings from `environ` (default os.environ), then `overrides` (e.g. CLI flags) on top.

    `overrides` name settings as the variables do (`sglang_url`, not `sglang.sglang_url`);
    `backends`: the backends OPENJEV_BACKEND may name.
    """
    env = os.environ if environ is None else environ
    section_of = dict((name, section) for section, name in setting_names())
    flat: dict[str, Any] = {}
    for name in section_of:
        variable = env_name(name)
        # An empty secret is kept, to be refused: an unset key in a deployment must not turn authentication off.
        if variable in env and (env[variable] != "" or name in SECRET_FIELDS):
            flat[name] = env[variable]
    for variable in env:
        if (
            variable.startswith(PREFIX)
            and variable[len(PREFIX) :].lower() not in section_of
            and variable not in DEPLOYMENT_VARIABLES
        ):
            raise SettingsError(f"{variable} is not a known setting (see docs/settings.md)")
    for key, value in overrides.items():
        if value is not None:
            flat[key] = value
    if "cache_dir" not in flat and env.get("XDG_CACHE_HOME"):
        flat["cache_dir"] = str(Path(env["XDG_CACHE_HOME"]) / "openjev")
    _strip_secrets(flat)
    raw: dict[str, Any] = {}
    for key, value in flat.items():
        section = section_of.get(key)
        (raw.setdefault(section, {}) if section else raw)[key] = value
    try:
        settings = msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(exc)) from None
    _check_values(settings, backends)
    return settings


def _strip_secrets(raw: dict[str, Any]) -> None:
    for key in SECRET_FIELDS:
        if isinstance(raw.get(key), str):
            # The presented key is stripped too: a trailing newline from a secret file must not lock everyone out.
            raw[key] = raw[key].strip()
            if not raw[key]:
                raise SettingsError(
                    f"{env_name(key)} is set but empty or only white space: set it to the key, or unset the "
                    f"variable (`unset {env_name(key)}`, or leave it out of the environment) to run without a key"
                )


def _check_values(settings: Settings, backends: Mapping[str, BackendSpec]) -> None:
    """What msgspec's constraints cannot say: finite numbers, a host, a backend that exists."""
    for section, name in setting_names():
        value = getattr(getattr(settings, section) if section else settings, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise SettingsError(f"{env_name(name)}: expected a finite number, got {value}")
    if settings.client_debias is not None:
        names = [name.strip() for name in settings.client_debias.split(",")]
        unknown = [name for name in names if name not in (*DEBIAS_MODES, "server")]
        if unknown or not any(names):
            raise SettingsError(
                f"{env_name('client_debias')}: expected `server` or modes among {', '.join(DEBIAS_MODES)}, "
                f"comma-separated; got {settings.client_debias!r}"
            )
    if not settings.host.strip():
        raise SettingsError(f"{env_name('host')}: expected an address or a host name, got an empty value")
    if settings.backend != "auto" and settings.backend not in backends:
        choices = ", ".join(["auto", *backends])
        raise SettingsError(f"{env_name('backend')}: expected one of {choices}, got {settings.backend!r}")


def _explain(exc: msgspec.ValidationError) -> str:
    message, path = explain_validation_error(exc)
    names = [part for part in path if isinstance(part, str)]
    if names:
        return f"{env_name(names[-1])}: {message}"
    return f"invalid settings: {exc}"


__all__ = [
    "SGLANG_DEFAULT_MODEL",
    "SGLANG_DEFAULT_PUBLIC_NAME",
    "SGLANG_DEFAULT_REVISION",
    "Settings",
    "SettingsError",
    "env_name",
    "load_settings",
    "setting_names",
]
