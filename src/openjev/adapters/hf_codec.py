"""Prompt codec from Hugging Face tokenizer files: `tokenizers` (Rust) plus the model's chat template."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from openjev.adapters.chat_template import render_chat_template
from openjev.adapters.token_floor import for_tokenizer
from openjev.domain.errors import StartupError
from openjev.domain.ports import ChatMessage

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"


class HFCodec:
    """A tokenizer.json + tokenizer_config.json pair (the chat template may sit in chat_template.jinja)."""

    def __init__(self, tokenizer: Tokenizer, chat_template: str, *, bos_token: str = "", eos_token: str = "") -> None:
        self._tokenizer = tokenizer
        self._plain = plain_text_twin(tokenizer)
        self._floor = for_tokenizer(self._plain)
        self._template = chat_template
        self._bos = bos_token
        self._eos = eos_token

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

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return render_chat_template(self._template, messages, bos_token=self._bos, eos_token=self._eos)

    # `encode_batch` of one text gives the ids `encode` gives, but releases the GIL while it works:
    # `encode` holds it, and a 2 MB state then starves the event loop for seconds even in a thread.

    def encode_template(self, text: str) -> list[int]:
        ids: list[int] = self._tokenizer.encode_batch([text], add_special_tokens=False)[0].ids
        return ids

    def encode_caller_text(self, text: str) -> list[int]:
        ids: list[int] = self._plain.encode_batch([text], add_special_tokens=False)[0].ids
        return ids

    def min_tokens(self, text: str) -> int:
        if self._floor is None:
            return 0
        floor, normalizer = self._floor
        if normalizer is not None and not text.isascii():  # a Unicode normalization leaves ASCII as it is
            text = normalizer.normalize_str(text)
        return floor.of(text.encode())

    def decode(self, token_ids: Sequence[int]) -> str:
        text: str = self._tokenizer.decode(list(token_ids), skip_special_tokens=False)
        return text


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
