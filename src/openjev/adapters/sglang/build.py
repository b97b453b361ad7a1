"""Runtime for `--backend sglang`: the SGLang HTTP client, with the model's Hugging Face tokenizer."""

from __future__ import annotations

from urllib.parse import urlsplit

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.flags import SGLANG_HOST
from openjev.adapters.sglang.lora import adapter_setting
from openjev.adapters.sglang.wire import max_reply_bytes
from openjev.domain.errors import SettingsError
from openjev.domain.ports import PromptCodec
from openjev.runtime import Runtime
from openjev.settings import SGLANG_DEFAULT_MODEL, SGLANG_DEFAULT_PUBLIC_NAME, Settings


def sglang_url(settings: Settings) -> str:
    """The SGLang to talk to: OPENJEV_SGLANG_URL (`--connect`), else the one openjev launches."""
    if settings.sglang.sglang_url is None:
        return f"http://{SGLANG_HOST}:{settings.sglang.sglang_port}"
    url = settings.sglang.sglang_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"OPENJEV_SGLANG_URL: expected http(s)://HOST:PORT, got {settings.sglang.sglang_url!r}")
    if parts.query or parts.fragment:
        raise SettingsError(
            f"OPENJEV_SGLANG_URL: a base URL takes no query or fragment: {settings.sglang.sglang_url!r}"
        )
    return url


def build_runtime(settings: Settings) -> Runtime:
    """Cheap and synchronous: nothing is contacted until `backend.start()`.

    With OPENJEV_ADAPTER (a LoRA adapter SGLang serves by name, `lora.py`) the served model is named
    `<model>+<adapter>`, as on the embedded backend, unless OPENJEV_SERVED_MODEL_NAME names it.
    """
    launching = settings.sglang.sglang_url is None
    adapter = adapter_setting(settings.adapter, launching=launching) if settings.adapter is not None else None
    model = settings.model or SGLANG_DEFAULT_MODEL
    base = settings.served_model_name or SGLANG_DEFAULT_PUBLIC_NAME
    public = base if adapter is None or settings.served_model_name else f"{base}+{adapter.name}"
    backend = SGLangBackend(
        sglang_url(settings),
        api_key=settings.sglang.backend_api_key,
        max_connections=settings.max_concurrent_branches + settings.max_concurrent_requests,
        startup_timeout=settings.sglang.startup_timeout,
        context_length=settings.context_length,
        expected_model=model,
        reply_cap=max_reply_bytes(settings.max_concurrent_branches, settings.max_options),
        peer=settings.sglang.sglang_peer,
        adapter=adapter.name if adapter is not None else None,
    )
    tokenizer = settings.tokenizer or model
    revision = settings.sglang_revision()
    # The pinned default revision is the model repository's commit: another tokenizer repository gets
    # only an explicit OPENJEV_REVISION, as before.
    tokenizer_revision = revision if tokenizer == model else settings.revision

    def load_codec() -> PromptCodec:
        from openjev.adapters.hf_codec import HFCodec

        codec = HFCodec.load(tokenizer, tokenizer_revision)
        backend.use_tokenizer_vocab(codec.id_limit())  # the bound on ids sent when SGLang does not say its own
        return codec

    pinned = f" at revision {revision}" if revision else ""
    with_adapter = f" with the LoRA adapter `{adapter.name}`" if adapter is not None else ""
    return Runtime(
        kind="sglang",
        backend=backend,
        load_codec=load_codec,
        public_model=public,
        model_description=f"{public}, served by SGLang from {model}{pinned}{with_adapter}.",
        accepted_models=frozenset({public, base, model}),
    )
