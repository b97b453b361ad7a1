"""One typed settings object, read from OPENJEV_* once at start-up and passed down.

Nothing else in openjev reads the environment. A bad value raises SettingsError naming the variable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import msgspec

from openjev.domain.debiasing import DEBIAS_MODES, DebiasMode
from openjev.domain.errors import SettingsError, explain_validation_error
from openjev.domain.limits import Limits

PREFIX = "OPENJEV_"
# Read by modal_app.py on the deploying machine, never by the server: tolerated, not a typo.
DEPLOYMENT_VARIABLES = frozenset({"OPENJEV_MIN_CONTAINERS", "OPENJEV_MAX_CONTAINERS", "OPENJEV_API_KEY_SECRET"})

SGLANG_DEFAULT_MODEL = "nvidia/Qwen3.6-35B-A3B-NVFP4"
# The commit of SGLANG_DEFAULT_MODEL served when OPENJEV_REVISION is unset, so every container
# loads the same weights and template whatever is pushed to the repository's `main` later.
# Move it with OPENJEV_REVISION (docs/settings.md, docs/modal.md).
SGLANG_DEFAULT_REVISION = "491c2f1ea524c639598bf8fa787a93fed5a6fbce"
SGLANG_DEFAULT_PUBLIC_NAME = "Qwen/Qwen3.6-35B-A3B"
MAX_OPTION_LIMIT = 255
SECRET_FIELDS = ("api_key", "backend_api_key")  # stripped of surrounding white space, like a presented key

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
BackendKind = Literal["auto", "embedded", "sglang", "fake"]
# Bias removal by backend. Embedded: what measured best on the small CPU model (docs/quality.md).
# SGLang: off until measured on the production model, since dividing out a prior hurt a stronger
# model in our measurements and option rotation multiplies GPU work. Fake: off, so tests see N + 1 calls.
DEFAULT_DEBIAS: dict[str, DebiasMode] = {"embedded": "rotate+calibrate", "sglang": "none", "fake": "none"}
KVCacheDtype = Literal["bf16", "bfloat16", "auto", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"]
_LIMITS = Limits()  # the admission limits' defaults are the domain's


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting and its default (docs/settings.md). Field `x` is read from `OPENJEV_X`."""

    # Model and backend choice.
    backend: BackendKind = "auto"
    model: str | None = None  # SGLang: HF id or path (default SGLANG_DEFAULT_MODEL); embedded: GGUF path/name/hf:.
    served_model_name: str | None = None  # public model id; default: the model's real name.
    revision: str | None = None  # SGLang's default model: SGLANG_DEFAULT_REVISION unless set (`sglang_revision`).
    tokenizer: str | None = None  # local dir with tokenizer.json (+ tokenizer_config.json) or an HF id.
    profile: str | None = None  # a named SGLang launch profile (see docs/settings.md).
    # SGLang's HTTP frontend. Python until a GPU run shows that 0.5.23's Rust frontend starts the
    # production model (multimodal-family checkpoints need its strict image-processor check).
    frontend: Literal["rust", "python"] = "python"

    # HTTP server.
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    api_key: str | None = None
    metrics_public: bool = False  # serve GET /metrics without the API key (a scraper on a private network)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # Admission limits (per API process): `openjev.bootstrap.limits_from` reads them by name.
    max_questions: Positive = _LIMITS.max_questions
    max_options: Annotated[int, msgspec.Meta(ge=2, le=MAX_OPTION_LIMIT)] = _LIMITS.max_options
    max_body_bytes: Positive = _LIMITS.max_body_bytes
    max_input_tokens: Positive = _LIMITS.max_input_tokens
    max_total_input_tokens: Positive = _LIMITS.max_total_input_tokens
    max_concurrent_requests: Positive = _LIMITS.max_concurrent_requests
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
    temperature: PositiveFloat = 1.0
    confidence: Literal["entropy", "typesafe"] = "typesafe"
    debias: DebiasMode | None = None  # default: the served model's, else the backend's (DEFAULT_DEBIAS)
    debias_max_orders: Annotated[int, msgspec.Meta(ge=1, le=64)] = 10  # option orders per choice question
    # The bias removal modes a request's `x_debias` may choose, comma-separated, besides the server's
    # own (`server`: only that one). Default: any. Rotation multiplies backend calls by up to 2n.
    client_debias: str | None = None
    prior_cache_entries: Annotated[int, msgspec.Meta(ge=0)] = 4096  # answer priors kept (LRU)
    # Refuse (Decisions only: System One has no refusal) a question whose answer labels got less than
    # this share of the model's next-token probability. Off by default: every question is answered.
    refuse_below_label_mass: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    # Bit-identical answers whatever else runs beside a question (docs/quality.md#reproducible-answers).
    # Default: on for the embedded backend, off for SGLang (whose cost must be measured on a GPU).
    deterministic: bool | None = None
    # More names a request's `model` may use, comma-separated (e.g. `gpt-6-luna` for code written
    # against OpenAI); listed in GET /v1/models beside the served model and `jev-latest`.
    model_aliases: str | None = None

    # SGLang backend.
    sglang_url: str | None = None  # connect to this SGLang (or router) instead of launching one.
    # What OPENJEV_SGLANG_URL is: found out at start-up (`auto`), or forced when that guesses wrong.
    sglang_peer: Literal["auto", "worker", "router"] = "auto"
    sglang_python: str | None = None  # python executable of an environment where SGLang is installed.
    sglang_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 30000
    backend_api_key: str | None = None
    context_length: Positive | None = None
    # SGLang's `--kv-cache-dtype`, always passed: "auto" lets a checkpoint that declares FP8 KV
    # quantisation turn the KV cache to FP8, which moves the label probabilities.
    kv_cache_dtype: KVCacheDtype = "bf16"
    startup_timeout: PositiveFloat = 1800.0

    # Embedded backend (defaults sized for a 2-core machine). Its engine: OpenVINO where the model's
    # architecture is one OpenVINO reads (llama, qwen2, qwen3: the packaged models), else llama.cpp.
    engine: Literal["auto", "openvino", "llama.cpp"] = "auto"
    cache_dir: str | None = None  # where packaged models are assembled; default $XDG_CACHE_HOME/openjev.
    threads: Positive | None = None  # default: the number of CPUs.
    parallel_slots: Positive = 4
    slot_context: Positive = 4096

    # Fake backend (tests and demos).
    fake_latency: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    fake_fail_after: int | None = None  # fail every call after this many (failure injection).
    fake_swap_labels: bool = False  # answer as if the label mapping were reversed (smoke tests).

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else Path.home() / ".cache" / "openjev"

    def resolved_debias(self, model_default: DebiasMode | None = None) -> DebiasMode:
        """OPENJEV_DEBIAS, else the default measured for the served model, else the backend's."""
        if self.debias is not None:
            return self.debias
        return model_default if model_default is not None else DEFAULT_DEBIAS[self.resolved_backend()]

    def client_debias_modes(self) -> frozenset[DebiasMode] | None:
        """OPENJEV_CLIENT_DEBIAS as modes (empty for `server`: none beyond the server's own); None: any."""
        if self.client_debias is None:
            return None
        names = {name.strip() for name in self.client_debias.split(",")} - {"", "server"}
        return frozenset(cast(DebiasMode, name) for name in DEBIAS_MODES if name in names)

    @property
    def request_timeout_seconds(self) -> float:
        """`request_timeout` under the name `Limits` (and GET /v1/limits) use."""
        return self.request_timeout

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

    def resolved_backend(self) -> Literal["embedded", "sglang", "fake"]:
        """`auto` means SGLang when one is configured (connect URL or SGLang python), else embedded."""
        if self.backend != "auto":
            return self.backend
        return "sglang" if (self.sglang_url or self.sglang_python) else "embedded"


def env_name(field: str) -> str:
    return PREFIX + field.upper()


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from `environ` (default os.environ), then `overrides` (e.g. CLI flags) on top."""
    env = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    for field in msgspec.structs.fields(Settings):
        name = env_name(field.name)
        # An empty secret is kept, to be refused: an unset key in a deployment must not turn authentication off.
        if name in env and (env[name] != "" or field.name in SECRET_FIELDS):
            raw[field.name] = env[name]
    known = set(Settings.__struct_fields__)
    for name in env:
        if name.startswith(PREFIX) and name[len(PREFIX) :].lower() not in known and name not in DEPLOYMENT_VARIABLES:
            raise SettingsError(f"{name} is not a known setting (see docs/settings.md)")
    for key, value in overrides.items():
        if value is not None:
            raw[key] = value
    if "cache_dir" not in raw and env.get("XDG_CACHE_HOME"):
        raw["cache_dir"] = str(Path(env["XDG_CACHE_HOME"]) / "openjev")
    _strip_secrets(raw)
    try:
        settings = msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(exc)) from None
    _check_values(settings)
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


def _check_values(settings: Settings) -> None:
    """What msgspec's constraints cannot say: finite numbers, a host."""
    for field in msgspec.structs.fields(Settings):
        value = getattr(settings, field.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise SettingsError(f"{env_name(field.name)}: expected a finite number, got {value}")
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


def _explain(exc: msgspec.ValidationError) -> str:
    message, path = explain_validation_error(exc)
    if path and isinstance(path[0], str):
        return f"{env_name(path[0])}: {message}"
    return f"invalid settings: {exc}"


__all__ = ["Settings", "SettingsError", "env_name", "load_settings"]
