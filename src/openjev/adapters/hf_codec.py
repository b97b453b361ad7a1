"""Prompt codec from Hugging Face tokenizer files: `tokenizers` (Rust) plus the model's chat template."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from openjev.adapters.bounded_memo import BoundedMemo
from openjev.adapters.chat_template import render_chat_template
from openjev.adapters.token_floor import for_tokenizer
from openjev.domain.errors import StartupError
from openjev.domain.ports import ChatMessage

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
SHORT_TEXT_CHARS = 1024  # tokenized holding the GIL (`_encode`)
# What makes a render differ from one call to the next: the date (`strftime_now`), Jinja's `random` filter.
_UNSTABLE = ("strftime_now", "random")


class HFCodec:
    """A tokenizer.json + tokenizer_config.json pair (the chat template may sit in chat_template.jinja).

    Short texts and renders are memoized (`BoundedMemo`): the template pieces, the tail and the
    question texts come back on every request, and tokenizing them again was a quarter of the API
    process's CPU time per request. A template that can render differently (the date, `random`) is
    never memoized.
    """

    def __init__(self, tokenizer: Tokenizer, chat_template: str, *, bos_token: str = "", eos_token: str = "") -> None:
        self._tokenizer = tokenizer
        self._plain = plain_text_twin(tokenizer)
        self._floor = for_tokenizer(self._plain)
        self._template = chat_template
        self._bos = bos_token
        self._eos = eos_token
        self._encodings: BoundedMemo[tuple[str, bool], tuple[int, ...]] = BoundedMemo(
            self._encode, lambda key: len(key[0])
        )
        self._floors: BoundedMemo[str, int] = BoundedMemo(self._min_tokens, len)  # the question texts recur
        self._renders: BoundedMemo[tuple[ChatMessage, ...], str] = BoundedMemo(
            self._render,
            lambda messages: sum(len(m.content) for m in messages),
            max_entries=0 if any(name in chat_template for name in _UNSTABLE) else 64,
        )

    @classmethod
    def load(cls, location: str, revision: str | None = None) -> HFCodec:
        """From a local directory, or a Hugging Face repo id for deployments that can download."""
        folder = Path(location)
        if not folder.is_dir():
            if location.startswith((".", "/", "~")) or folder.exists():
                raise StartupError(f"tokenizer location {location} is not a directory (OPENJEV_TOKENIZER)")
            folder = _download(location, revision)
        tokenizer_path = folder / TOKENIZER_FILE
        if not tokenizer_path.is_file():
            raise StartupError(f"no {TOKENIZER_FILE} in {folder} (OPENJEV_TOKENIZER)")
        config: dict[str, Any] = {}
        if (folder / CONFIG_FILE).is_file():
            config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        template = config.get("chat_template")
        if (folder / TEMPLATE_FILE).is_file():
            template = (folder / TEMPLATE_FILE).read_text(encoding="utf-8")
        if isinstance(template, list):  # a list of named templates: take the default one
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        if not isinstance(template, str):
            raise StartupError(f"no chat template in {folder} ({CONFIG_FILE} or {TEMPLATE_FILE})")
        return cls(
            Tokenizer.from_file(str(tokenizer_path)),
            template,
            bos_token=_token_text(config.get("bos_token")),
            eos_token=_token_text(config.get("eos_token")),
        )

    def id_limit(self) -> int:
        """One more than the tokenizer's largest id, added tokens included: no encoding goes beyond it."""
        return max(self._tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1

    def render(self, messages: Sequence[ChatMessage]) -> str:
        if any(m.tool_calls for m in messages):  # tool-call arguments are dicts: not a memo key
            return self._render(tuple(messages))
        return self._renders(tuple(messages))

    def encode_template(self, text: str) -> list[int]:
        return list(self._encodings((text, True)))

    def encode_caller_text(self, text: str) -> list[int]:
        return list(self._encodings((text, False)))

    def _render(self, messages: tuple[ChatMessage, ...]) -> str:
        return render_chat_template(self._template, messages, bos_token=self._bos, eos_token=self._eos)

    def _encode(self, key: tuple[str, bool]) -> tuple[int, ...]:
        """`key` is (text, special tokens recognised): the trusted or the plain-text tokenizer."""
        text, special = key
        return _encode(self._tokenizer if special else self._plain, text)

    def min_tokens(self, text: str) -> int:
        return self._floors(text)

    def _min_tokens(self, text: str) -> int:
        if self._floor is None:
            return 0
        floor, normalizer = self._floor
        if normalizer is not None and not text.isascii():  # a Unicode normalization leaves ASCII as it is
            text = normalizer.normalize_str(text)
        return floor.of(text.encode())

    def decode(self, token_ids: Sequence[int]) -> str:
        text: str = self._tokenizer.decode(list(token_ids), skip_special_tokens=False)
        return text


def _encode(tokenizer: Tokenizer, text: str) -> tuple[int, ...]:
    """The same ids either way: `encode_batch` of one text releases the GIL while it works, `encode` holds it.

    A 2 MB state would starve the event loop for seconds under `encode`, even in a thread; a short
    text holds it well under a millisecond, and `encode` saves the batch machinery's fixed cost.
    """
    if len(text) <= SHORT_TEXT_CHARS:
        return tuple(tokenizer.encode(text, add_special_tokens=False).ids)
    return tuple(tokenizer.encode_batch([text], add_special_tokens=False)[0].ids)


def plain_text_twin(tokenizer: Tokenizer) -> Tokenizer:
    """A copy that tokenizes every added token's spelling (`<|im_end|>`, `<think>`) as plain text.

    `encode_special_tokens` only covers tokens flagged special, so every added token is flagged first.
    """
    spec = json.loads(tokenizer.to_str())
    for added in spec.get("added_tokens") or []:
        added["special"] = True
    twin = Tokenizer.from_str(json.dumps(spec))
    twin.encode_special_tokens = True
    return twin


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return value if isinstance(value, str) else ""


def _download(repo_id: str, revision: str | None) -> Path:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - tokenizers depends on huggingface_hub
        raise StartupError(f"{repo_id} is not a directory and huggingface_hub is missing") from exc
    try:
        path = Path(hf_hub_download(repo_id, TOKENIZER_FILE, revision=revision))
        hf_hub_download(repo_id, CONFIG_FILE, revision=revision)
        try:
            hf_hub_download(repo_id, TEMPLATE_FILE, revision=revision)
        except Exception:  # noqa: BLE001 - the template file is optional; the tokenizer config may hold it
            pass
    except Exception as exc:
        raise StartupError(f"cannot fetch the tokenizer of {repo_id} (revision {revision}): {exc}") from exc
    return path.parent
