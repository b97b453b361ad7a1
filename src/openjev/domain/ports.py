"""The two ports the domain needs: a scoring backend and a prompt codec.

Adapters (SGLang over HTTP, embedded llama.cpp, fake) implement them; the evaluation use case and
the prompt plan depend only on these protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec


class ToolCall(msgspec.Struct, frozen=True):
    """A tool call an assistant turn makes: rendered by the chat template's own tool-call form.

    `arguments` is the call's arguments as the template expects them: an object (a JSON object the
    caller sent, parsed) or, when they are not one, the text as sent.
    """

    call_id: str
    name: str
    arguments: str | dict[str, Any]


class ChatMessage(msgspec.Struct, frozen=True):
    """One message as the chat template sees it: text, and for agent transcripts tool calls or a tool result.

    An assistant message may carry `tool_calls`; a message with role `tool` is the result of the
    call named by `tool_call_id`.
    """

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class CallUsage(msgspec.Struct, frozen=True):
    """What the backend reported for one single-token call.

    `cached_tokens` is None when the backend does not report cache hits (never a made-up 0).
    """

    prompt_tokens: int
    cached_tokens: int | None


class LabelScores(msgspec.Struct, frozen=True):
    """Raw (untempered) log-probabilities of the requested label ids, in the order asked.

    `label_mass` is the share of the model's whole next-token distribution that fell on these
    labels (1.0: it wanted to say nothing else), when the call asked for it and the backend can
    measure it; None otherwise.
    """

    logprobs: tuple[float, ...]
    usage: CallUsage
    label_mass: float | None = None


class ScoreCall(msgspec.Struct, frozen=True):
    """One branch to score: the log-probabilities of `label_ids` as the next token after `token_ids`.

    `call_id` is unique per call, as for every backend call; `abort` takes it. `label_mass` asks
    the backend to measure the labels' share of the whole next-token distribution too.
    """

    call_id: str
    token_ids: Sequence[int]
    label_ids: Sequence[int]
    label_mass: bool = False


class BackendHealth(msgspec.Struct, frozen=True):
    """`ok` False means down. A slow backend is still ok (`slow` True): it answers, late."""

    ok: bool
    detail: str
    slow: bool = False


@runtime_checkable
class ScoringBackend(Protocol):
    """Scores the next token after a token sequence, for a chosen set of token ids.

    Every call carries a `call_id` that is unique per call; `abort` takes those ids. Calls are
    concurrent: an adapter must allow many in flight at once.

    A request's branches are scored together with `score_many`, so that an adapter whose wire
    costs something per request (SGLang over HTTP) sends all of them in one request; `score` is
    the same thing for one call (start-up checks, tests).
    """

    async def start(self) -> None:
        """Load or connect; returns when calls can be made. Raises BackendUnavailable otherwise."""

    async def close(self) -> None:
        """Release every resource; in-flight calls may fail."""

    async def health(self) -> BackendHealth: ...

    def context_tokens(self) -> int | None:
        """Largest prompt + output a single call may use, when the backend knows it (after start)."""

    def vocab_size(self) -> int | None:
        """How many token ids the model has (ids 0 to this minus one), when the backend knows it (after start).

        The use case refuses a request whose prompt or labels hold another id before any call: an
        SGLang server exits on one.
        """

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        """Prefill `token_ids` (one output token, discarded) so later calls reuse the cached prefix."""

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        """Log-probabilities of exactly `label_ids` as the next token after `token_ids`.

        A label id the backend did not return is an error (BackendError), never a zero.
        """

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """`score` for every call, results in the order of `calls` (an empty list for none).

        Each call keeps its own id, so `abort` can still stop any of them. When one call fails the
        whole batch fails with that call's error (the use case fails the request anyway).
        """

    async def abort(self, call_ids: Sequence[str]) -> None:
        """Best effort: stop the given in-flight calls in the backend. Never raises."""


class PromptCodec(Protocol):
    """The model's chat template and tokenizer. Pure CPU work, no I/O once constructed.

    The two encoders are the prompt-injection boundary: text openjev wrote (the rendered template,
    the answer format) is trusted with special tokens; text a caller sent never is.
    """

    def render(self, messages: Sequence[ChatMessage]) -> str:
        """Render with the model's chat template, generation prompt added, thinking disabled."""

    def encode_template(self, text: str) -> list[int]:
        """Token ids of trusted template text: special tokens in it recognised, nothing added around it."""

    def encode_caller_text(self, text: str) -> list[int]:
        """Token ids of untrusted caller text: a special token's spelling (`<|im_end|>`) stays plain text.

        This is what keeps a state from closing its own turn and writing an answer for the model.
        """

    def min_tokens(self, text: str) -> int:
        """A lower bound on `len(encode_caller_text(text))`, computed without tokenizing (0 when none is known).

        It must never exceed the real count: a request is refused on it before its text is tokenized.
        """

    def decode(self, token_ids: Sequence[int]) -> str: ...
