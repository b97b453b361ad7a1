"""A tiny ChatML codec: byte tokens, two special tokens and one token per answer label.

It lets the fake backend run with no tokenizer file at all, while still going through the real
chat-template renderer and the real label verification (greedy longest match, like a BPE that
knows " A" and " AB").
"""

from __future__ import annotations

from collections.abc import Sequence

from openjev.adapters.chat_template import render_chat_template
from openjev.adapters.token_floor import ByteTokenFloor
from openjev.domain.labels import NO, YES, candidate_labels
from openjev.domain.ports import ChatMessage

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ("<|im_start|>", "<|im_end|>")
_BYTE_BASE = len(SPECIALS)


class ChatMLByteCodec:
    def __init__(self) -> None:
        pieces = [" " + label for label in (YES, NO, *candidate_labels())]
        self._pieces: dict[bytes, int] = {}
        for i, piece in enumerate(pieces):
            self._pieces[piece.encode()] = _BYTE_BASE + 256 + i
        self._by_id: dict[int, bytes] = {v: k for k, v in self._pieces.items()}
        self._longest = max(len(p) for p in self._pieces)
        self._floor = ByteTokenFloor.from_tokens([*self._pieces, *(bytes([b]) for b in range(256))])

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return render_chat_template(CHATML_TEMPLATE, messages)

    def encode_template(self, text: str) -> list[int]:
        ids: list[int] = []
        rest = text
        while rest:
            cut, special = min(((rest.find(s), s) for s in SPECIALS if s in rest), default=(len(rest), ""))
            ids += self._encode_plain(rest[:cut].encode())
            if special:
                ids.append(SPECIALS.index(special))
            rest = rest[cut + len(special) :]
        return ids

    def encode_caller_text(self, text: str) -> list[int]:
        return self._encode_plain(text.encode())

    def min_tokens(self, text: str) -> int:
        return self._floor.of(text.encode())

    def _encode_plain(self, data: bytes) -> list[int]:
        ids: list[int] = []
        i = 0
        while i < len(data):
            for size in range(min(self._longest, len(data) - i), 1, -1):
                token = self._pieces.get(data[i : i + size])
                if token is not None:
                    ids.append(token)
                    i += size
                    break
            else:
                ids.append(_BYTE_BASE + data[i])
                i += 1
        return ids

    def decode(self, token_ids: Sequence[int]) -> str:
        out = bytearray()
        for t in token_ids:
            if t < _BYTE_BASE:
                out += SPECIALS[t].encode()
            elif t < _BYTE_BASE + 256:
                out.append(t - _BYTE_BASE)
            else:
                out += self._by_id[t]
        return out.decode("utf-8", errors="replace")
