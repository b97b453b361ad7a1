"""A decision GGUF's own prompt: its `systemone` template, labels and temperatures, as llama.cpp reads them.

`read_decision` reads what the GGUF declares (refusing the types openjev cannot serve, with why);
`SystemOnePrompt` is the domain's `ModelPrompt` for it. Each question is one whole prompt: the
template gets llama.cpp's variables (`id`, `type`, `instructions`, `state`, `options` with `key`,
`description` and, for most types, `label`; `questions` for nimble; `images`, always empty here),
raw JSON values the template serializes itself. The label ids, the option orders, the readings and
the temperatures follow the type's rules (decision_types.py).

One difference from llama.cpp, on purpose: a caller's text that spells one of the model's special
tokens (`<|im_end|>`) is escaped (`<|im_end|>` becomes `<¦im_end¦>`, as llama.cpp escapes it for
kev and lfm2-d1-omni, other special spellings get a word joiner), so that a state cannot close its
own turn. llama.cpp's server parses it as the special token for these types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gguf

from openjev.adapters.chat_template import render_template, template_message
from openjev.adapters.embedded.decision_types import (
    DECISION_TYPES,
    LLAMA_SERVER,
    MAX_SCORE_LEVELS,
    DecisionType,
    served_types,
    temperature_name,
)
from openjev.domain.debiasing import Order, identity
from openjev.domain.decision import Ask, Conversation, State
from openjev.domain.errors import InvalidRequest, StartupError
from openjev.domain.kinds import rules
from openjev.domain.labels import LabelSet
from openjev.domain.ports import PromptCodec
from openjev.domain.reading import Reading

SYSTEMONE_TEMPLATE = "tokenizer.chat_template.systemone"
_WIRE_TYPES = {"yes_no": "noul", "choice": "choice", "scale": "score"}
_LETTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
_UPPER = _LETTERS[:26]
_CODES = _UPPER + [a + b for a in _UPPER for b in _UPPER]
_POOL = _UPPER + [f"{i:02d}" for i in range(100)] + _LETTERS[26:] + [f"#{i}" for i in range(200)] + _CODES[26:]
_SPECIAL = {int(gguf.TokenType.CONTROL), int(gguf.TokenType.USER_DEFINED), int(gguf.TokenType.UNKNOWN)}
_NAMED_SPECIAL = re.compile(r"<\|([A-Za-z0-9_]+)\|>")


@dataclass(frozen=True)
class DecisionMetadata:
    """What a decision GGUF declares: its type, its `systemone` template, its temperatures by name."""

    kind: DecisionType
    template: str
    temperatures: Mapping[str, float]

    @property
    def description(self) -> str:
        return f"the model's own `systemone` template, decision type {self.kind.name}"


def read_decision(metadata: Mapping[str, Any], source: str = "the GGUF file") -> DecisionMetadata | None:
    """The GGUF's decision metadata, None for an ordinary chat model; StartupError for a type openjev
    cannot serve (saying why, and what serves it) or for metadata llama.cpp would refuse too."""
    prefix = f"{metadata.get(gguf.Keys.General.ARCHITECTURE)}.decision."
    name = metadata.get(prefix + "type")
    if name is None:
        return None
    kind = DECISION_TYPES.get(str(name))
    if kind is None:
        raise StartupError(
            f"{source} declares the decision type {name!r}, which openjev does not know "
            f"(it serves {', '.join(served_types())})"
        )
    if kind.refused is not None:
        raise StartupError(
            f"{source} is a `{kind.name}` decision model, which openjev cannot serve: {kind.refused}; {LLAMA_SERVER}"
        )
    template = metadata.get(SYSTEMONE_TEMPLATE)
    if not isinstance(template, str) or not template.strip():
        raise StartupError(f"{source} is a `{kind.name}` decision model without its {SYSTEMONE_TEMPLATE}")
    temperatures: dict[str, float] = {}
    for key, value in metadata.items():
        if key.startswith(prefix + "temperature."):
            temperature = _as_llama_reads(value)
            if not temperature > 0:
                raise StartupError(f"{source} has an invalid decision temperature: {key} = {value}")
            temperatures[key.removeprefix(prefix + "temperature.")] = temperature
    return DecisionMetadata(kind, template, temperatures)


def _as_llama_reads(value: Any) -> float:
    """llama.cpp reads a temperature as text with six decimals (`%f`), then as a 32-bit float."""
    try:
        return float(f"{float(value):f}")
    except (TypeError, ValueError):
        return 0.0


def special_texts(metadata: Mapping[str, Any]) -> list[str]:
    """The spellings of the GGUF's special tokens (control, user-defined, unknown)."""
    tokens = list(metadata.get(gguf.Keys.Tokenizer.LIST) or [])
    types = list(metadata.get(gguf.Keys.Tokenizer.TOKEN_TYPE) or [])
    return [t for t, kind in zip(tokens, types, strict=False) if kind in _SPECIAL and len(t) > 1]


class SystemOnePrompt:
    """The domain's `ModelPrompt` for a decision GGUF: build it with the model's codec once it is loaded."""

    def __init__(self, codec: PromptCodec, decision: DecisionMetadata, specials: Iterable[str] = ()) -> None:
        self._codec = codec
        self._type = decision.kind
        self._template = decision.template
        self._temperatures = dict(decision.temperatures)
        self._escape = _escaper(specials)
        self.labels, self.max_options = self._fixed_labels()
        self.description = f"{decision.description}, up to {self.max_options} options"

    # -- ModelPrompt

    def orders(self, ask: Ask) -> tuple[Order, ...]:
        n = len(ask.options)
        if ask.kind == "yes_no":  # shown in the type's own order; a rating scale answers (yes, no) itself
            return ((),) if self._type.noul_ratings or self._type.noul_true_first else ((1, 0),)
        if ask.kind == "choice" and self._type.reversed_choice and n > 1:
            return (identity(n), identity(n)[::-1])
        return (identity(n),)

    def check(self, ask: Ask) -> None:
        n = len(ask.options)
        if ask.kind == "scale" and not 2 <= n <= MAX_SCORE_LEVELS:
            raise InvalidRequest.one(
                ask.where, f"this decision model takes 2 to {MAX_SCORE_LEVELS} levels, got {n}", "too_many_levels"
            )
        if n > self.max_options:
            raise InvalidRequest.one(
                ask.where,
                f"too many options ({n}): this decision model reads at most {self.max_options}",
                "too_many_options",
            )

    def prompt_ids(self, state: State, asks: Sequence[Ask], index: int, order: Order) -> list[int]:
        ask = asks[index]
        variables: dict[str, Any] = {
            "id": _ask_id(ask, index),
            "type": _WIRE_TYPES[ask.kind],
            "instructions": _instructions(ask),
            "state": _state(state),
            "options": self._options(ask, self._shown(ask, order)),
        }
        if self._type.lists_questions:
            variables["questions"] = [
                {
                    "id": _ask_id(other, i),
                    "type": _WIRE_TYPES[other.kind],
                    "instructions": _instructions(other),
                    "options": self._options(other, self._shown(other, identity(len(other.options)))),
                }
                for i, other in enumerate(asks)
            ]
        if self._type.sorted_keys:
            variables = _sorted(variables)
        variables = _mapped(variables, self._escape)
        variables["images"] = []
        return self._codec.encode_template(render_template(self._template, variables))

    def reading(self, ask: Ask, order: Order) -> tuple[tuple[int, ...], Reading]:
        n = len(ask.options)
        temperature = self._temperature(ask)
        if self._type.labels == "per_question":
            groups = self._question_labels(ask, self._shown(ask, order))[1]
            flat = tuple(token for group in groups for token in group)
            return flat, Reading(temperature=temperature, groups=tuple(len(g) for g in groups))
        if ask.kind == "yes_no" and self._type.noul_ratings:
            return self.labels.token_ids[: self._type.noul_ratings], Reading(temperature=temperature, ratings=True)
        return self.labels.token_ids[:n], Reading(temperature=temperature)

    # -- the type's rules

    def _shown(self, ask: Ask, order: Order) -> Order:
        """The ask's options by position as the template gets them (yes/no: in the type's order)."""
        if ask.kind == "yes_no":
            return (0, 1) if self._type.noul_true_first else (1, 0)
        return tuple(order) or identity(len(ask.options))

    def _options(self, ask: Ask, shown: Order) -> list[dict[str, Any]]:
        options: list[dict[str, Any]] = [
            {"key": _key(ask.options[i].key), "description": ask.options[i].text} for i in shown
        ]
        if self._type.labels == "codes":
            for option, label in zip(options, self.labels.labels, strict=False):
                option["label"] = label
        elif self._type.labels == "per_question":
            for option, label in zip(options, self._question_labels(ask, shown)[0], strict=True):
                option["label"] = label
        return options

    def _temperature(self, ask: Ask) -> float:
        names = temperature_name(_WIRE_TYPES[ask.kind], len(ask.options), self._type.temperature_buckets)
        return next((self._temperatures[name] for name in names if name in self._temperatures), 1.0)

    def _single(self, text: str) -> int | None:
        """The token id of `text` when it is one token as plain text, else None."""
        ids = self._codec.encode_caller_text(text)
        return ids[0] if len(ids) == 1 else None

    def _fixed_labels(self) -> tuple[LabelSet, int]:
        """The type's fixed labels by position (StartupError when the tokenizer cannot write them) and
        the most options a question may have."""
        rule = self._type.labels
        if rule == "per_question":
            for forms in (["yes", "Yes", "YES"], ["no", "No", "NO"], *([str(i)] for i in range(MAX_SCORE_LEVELS))):
                if not self._forms(forms):
                    raise StartupError(
                        f"this `{self._type.name}` decision model cannot read {forms[0]!r}: it is not one token"
                    )
            texts = [code for code in _UPPER if self._single(code) is not None]
            yes, no = self._forms(["yes", "Yes", "YES"])[0], self._forms(["no", "No", "NO"])[0]
            return _label_set(texts, [self._single(t) or 0 for t in texts], yes, no), self._type.max_options
        found = [(code, self._single(code)) for code in (_LETTERS if rule == "letters" else _CODES)]
        if rule == "letters" and any(token is None for _, token in found):
            missing = [code for code, token in found if token is None]
            raise StartupError(f"this `{self._type.name}` decision model's labels {missing} are not single tokens")
        usable = [(code, token) for code, token in found if token is not None][: self._type.max_options]
        texts, ids = [code for code, _ in usable], [token for _, token in usable]
        if len(ids) < 2:
            raise StartupError(f"this `{self._type.name}` decision model's tokenizer writes fewer than 2 labels")
        yes, no = (ids[0], ids[1]) if self._type.noul_true_first else (ids[1], ids[0])
        return _label_set(texts, ids, yes, no), len(ids)

    def _forms(self, forms: Sequence[str]) -> list[int]:
        """The distinct single-token ids among `forms`."""
        found: list[int] = []
        for form in forms:
            token = self._single(form)
            if token is not None and token not in found:
                found.append(token)
        return found

    def _question_labels(self, ask: Ask, shown: Order) -> tuple[list[str], list[list[int]]]:
        """lfm2-d1's labels of one question shown in `shown`: each label's text and the tokens it is read on."""
        options = [ask.options[i] for i in shown]
        if ask.kind != "choice":
            keys = [_key(o.key) for o in options]
            yes_no = {"true": ["yes", "Yes", "YES"], "false": ["no", "No", "NO"]}
            return keys, [self._forms(yes_no[k] if ask.kind == "yes_no" else [k]) for k in keys]
        keys = [_key(o.key) for o in options]
        if all(len(k) == 1 and k.isascii() and k.isalpha() for k in keys):
            codes = keys
        else:
            codes = _UPPER[: len(keys)] if len(keys) <= 26 else [f"{i:02d}" for i in range(len(keys))]
        texts: list[str] = []
        groups: list[list[int]] = []
        for code in codes:
            for candidate in (code, *_POOL):
                token = self._single(candidate)
                if token is not None and all(token != group[0] for group in groups):
                    texts.append(candidate)
                    groups.append([token, *(t for t in self._forms([" " + candidate]) if t != token)])
                    break
            else:
                message = f"no single-token label left for {len(keys)} options"
                raise InvalidRequest.one(ask.where, message, "too_many_options")
        return texts, groups


def _label_set(texts: Sequence[str], ids: Sequence[int], yes: int, no: int) -> LabelSet:
    return LabelSet(labels=tuple(texts), token_ids=tuple(ids), yes_id=yes, no_id=no)


def _ask_id(ask: Ask, index: int) -> str:
    return ask.name if ask.name is not None else str(index)


def _instructions(ask: Ask) -> str:
    return ask.instructions if ask.instructions is not None else rules(ask).default_instructions


def _key(key: object) -> str:
    """An option's key as llama.cpp's wire writes it: a name, a level's number, true or false."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _state(state: State) -> Any:
    """The state as the template gets it: the text, or the conversation's messages."""
    if isinstance(state, Conversation):
        return [template_message(message) for message in state.messages]
    return state.text


def _sorted(value: Any) -> Any:
    """`value` with every object's keys sorted, all the way down."""
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def _mapped(value: Any, text: Callable[[str], str]) -> Any:
    """`value` with `text` applied to every string, object keys included."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(key): _mapped(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_mapped(item, text) for item in value]
    return value


def _escaper(specials: Iterable[str]) -> Callable[[str], str]:
    """A function that makes every special token spelling in a text plain (see the module's docstring)."""
    spellings = sorted(set(specials), key=len, reverse=True)
    if not spellings:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(s) for s in spellings))

    def plain(found: re.Match[str]) -> str:
        named = _NAMED_SPECIAL.fullmatch(found.group())
        return f"<\u00a6{named.group(1)}\u00a6>" if named else found.group()[0] + "\u2060" + found.group()[1:]

    return lambda text: pattern.sub(plain, text) if pattern.search(text) else text
