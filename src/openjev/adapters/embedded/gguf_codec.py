"""PromptCodec rebuilt from a GGUF file's own metadata: its BPE tokenizer and its chat template.

The embedded engine tokenizes with llama.cpp; openjev tokenizes in Python (the prompt plan splits
the prompt and counts tokens before any engine call). Both must produce the same ids, so the
`tokenizers.Tokenizer` built here mirrors llama.cpp's byte-level BPE exactly: the same vocabulary
and merges, the same pre-tokenizer regexes for the model's `tokenizer.ggml.pre` (copied from
llama.cpp's llama-vocab.cpp), and the same special tokens recognised in text. Only the pre-tokenizer
families below are accepted; anything else refuses to start rather than tokenizing subtly wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

from openjev.adapters.embedded.gguf_file import read_gguf_metadata
from openjev.adapters.hf_codec import HFCodec
from openjev.domain.errors import StartupError

# GPT-2's split, with the trailing `|\s+` that llama.cpp's own GPT-2 splitter implements.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


@dataclass(frozen=True)
class PreTokenizerFamily:
    """llama.cpp's pre-tokenizer regexes (applied in turn) and its `ignore_merges` flag."""

    regexes: tuple[str, ...]
    ignore_merges: bool = False


_SMOLLM = PreTokenizerFamily((r"\p{N}", _GPT2))
_GPT2_FAMILY = PreTokenizerFamily((_GPT2,))
_LLAMA3_FAMILY = PreTokenizerFamily((_LLAMA3,), ignore_merges=True)
_QWEN2_FAMILY = PreTokenizerFamily((_QWEN2,))

# `tokenizer.ggml.pre` values, grouped as llama.cpp groups them.
PRE_TOKENIZERS: dict[str, PreTokenizerFamily] = {
    **dict.fromkeys(("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"), _SMOLLM),
    **dict.fromkeys(("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling"), _GPT2_FAMILY),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "dbrx", "smaug-bpe"), _LLAMA3_FAMILY
    ),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "stablelm2"), _QWEN2_FAMILY),
}

_SYSTEMONE = "tokenizer.chat_template.systemone"
# Only for the start-up checks of a decision GGUF without a chat template: its prompts come from its own.
_PLAIN_TEMPLATE = "{% for message in messages %}{{ message.role }}: {{ message.content }}\n{% endfor %}"

# Token types llama.cpp splits out of text before BPE when it parses special tokens: control tokens
# (special, like `<|im_start|>`) and user-defined or unknown ones (matched as plain added tokens).
_CONTROL = int(gguf.TokenType.CONTROL)
_ADDED = {int(gguf.TokenType.USER_DEFINED), int(gguf.TokenType.UNKNOWN)}


class GGUFCodec(HFCodec):
    """The PromptCodec of a GGUF chat model: an HFCodec whose tokenizer is rebuilt from the GGUF.

    Build it with `GGUFCodec.from_gguf(path)`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        chat_template: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        vocab_size: int | None = None,
    ) -> None:
        super().__init__(tokenizer, chat_template, bos_token=bos_token, eos_token=eos_token)
        self.vocab_size = vocab_size if vocab_size is not None else tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_gguf(cls, path: str | Path) -> GGUFCodec:
        """Read the tokenizer and chat template of the GGUF at `path` (about 0.2 s for SmolLM2)."""
        return cls.from_metadata(read_gguf_metadata(path), source=str(path))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], *, source: str = "the GGUF file") -> GGUFCodec:
        template = metadata.get(gguf.Keys.Tokenizer.CHAT_TEMPLATE)
        if (not isinstance(template, str) or not template.strip()) and metadata.get(_SYSTEMONE):
            template = _PLAIN_TEMPLATE  # a decision GGUF prompts with its own template (decision_prompt.py)
        if not isinstance(template, str) or not template.strip():
            raise StartupError(f"{source} has no tokenizer.chat_template: openjev needs a chat model")
        tokens: list[str] = list(metadata.get(gguf.Keys.Tokenizer.LIST) or [])
        return cls(
            build_tokenizer(metadata, source=source),
            template,
            bos_token=_token_text(tokens, metadata.get(gguf.Keys.Tokenizer.BOS_ID)),
            eos_token=_token_text(tokens, metadata.get(gguf.Keys.Tokenizer.EOS_ID)),
            vocab_size=len(tokens),
        )


def build_tokenizer(metadata: Mapping[str, Any], *, source: str = "the GGUF file") -> Tokenizer:
    """A byte-level BPE `Tokenizer` equivalent to llama.cpp's for this GGUF's vocabulary."""
    kind = metadata.get(gguf.Keys.Tokenizer.MODEL)
    if kind != "gpt2":
        raise StartupError(
            f"{source} uses the {kind!r} tokenizer; the embedded backend supports byte-level BPE ('gpt2') "
            "GGUF models such as SmolLM2, Llama 3 or Qwen 2.5"
        )
    pre = str(metadata.get(gguf.Keys.Tokenizer.PRE) or "default")
    family = PRE_TOKENIZERS.get(pre)
    if family is None:
        raise StartupError(
            f"{source} uses the {pre!r} pre-tokenizer, which openjev cannot reproduce exactly yet "
            f"(supported: {', '.join(sorted(PRE_TOKENIZERS))})"
        )
    tokens: list[str] = list(metadata.get(gguf.Keys.Tokenizer.LIST) or [])
    merges: list[str] = list(metadata.get(gguf.Keys.Tokenizer.MERGES) or [])
    if not tokens or not merges:
        raise StartupError(f"{source} has no tokenizer.ggml.tokens or tokenizer.ggml.merges")
    vocab = {token: index for index, token in enumerate(tokens)}  # a repeated token keeps its last id, as in llama.cpp
    pairs = [_split_merge(merge) for merge in merges]
    tokenizer = Tokenizer(models.BPE(vocab, pairs, ignore_merges=family.ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(regex), behavior="isolated") for regex in family.regexes]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    types: list[int] = list(metadata.get(gguf.Keys.Tokenizer.TOKEN_TYPE) or [])
    control = [t for t, kind_ in zip(tokens, types, strict=False) if kind_ == _CONTROL and t]
    other = [t for t, kind_ in zip(tokens, types, strict=False) if kind_ in _ADDED and t]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in other])
    return tokenizer


def _split_merge(merge: str) -> tuple[str, str]:
    """`"a b"` -> ("a", "b"), splitting at the first space after the first character, like llama.cpp."""
    cut = merge.find(" ", 1)
    if cut < 0:
        raise StartupError(f"malformed BPE merge {merge!r} in tokenizer.ggml.merges")
    return merge[:cut], merge[cut + 1 :]


def _token_text(tokens: list[str], token_id: Any) -> str:
    return tokens[token_id] if isinstance(token_id, int) and 0 <= token_id < len(tokens) else ""
