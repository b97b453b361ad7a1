"""Runtime for `--backend fake`: the fake backend with the built-in codec, or a real tokenizer."""

from __future__ import annotations

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.hf_codec import HFCodec
from openjev.domain.ports import PromptCodec
from openjev.runtime import Runtime
from openjev.settings import Settings

FAKE_MODEL = "openjev/fake"


def build_runtime(settings: Settings) -> Runtime:
    tokenizer = settings.tokenizer

    def load_codec() -> PromptCodec:
        return HFCodec.load(tokenizer, settings.revision) if tokenizer else ChatMLByteCodec()

    public = settings.served_model_name or FAKE_MODEL
    return Runtime(
        kind="fake",
        backend=FakeBackend(
            latency=settings.fake.fake_latency,
            fail_after=settings.fake.fake_fail_after,
            swap_labels=settings.fake.fake_swap_labels,
            context=settings.context_length,
            record_calls=False,  # a server must not keep every call's tokens
        ),
        load_codec=load_codec,
        public_model=public,
        model_description="Deterministic fake model for tests and demos: its answers mean nothing.",
        accepted_models=frozenset({public, FAKE_MODEL}),
    )
