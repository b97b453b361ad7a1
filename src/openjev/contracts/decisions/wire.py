"""OpenAI Decisions wire types (`POST /v1/decisions`), after openai-python 3.51.0's
`types/decision_create_params.py` (request) and `types/decision.py` (response).

Decoding is strict (no "5" for 5). Unknown top-level fields are ignored; unknown fields inside a
question, an input item or a part are refused, so a misspelt field is never silently dropped. Each
question type says, in one place, which kind of ask it is and how the core's answer reads on this
wire. Input items are decoded one by one (`input.py`): a message's `type` may be omitted.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from openjev.contracts.extensions import optional
from openjev.domain.debiasing import DebiasMode
from openjev.domain.decision import Ask, AskKind, Loc
from openjev.domain.errors import Issue, echo
from openjev.domain.kinds import CHOICE, SCALE, YES_NO
from openjev.domain.outcome import Distribution

ChoiceValue = str | bool
"""A choice's value: typed, so `"true"` and `true` are different options."""


class CacheBreakpoint(msgspec.Struct, forbid_unknown_fields=True):
    """Marks the end of a reusable prompt prefix (accepted; openjev's prefix cache is automatic)."""

    mode: Literal["explicit"]


class InputText(msgspec.Struct, tag_field="type", tag="input_text", forbid_unknown_fields=True):
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputImage(msgspec.Struct, tag_field="type", tag="input_image", forbid_unknown_fields=True):
    """Refused: only text is supported."""

    image_url: str
    detail: Literal["low", "high", "auto", "original"] | None = None
    prompt_cache_breakpoint: CacheBreakpoint | None = None


JSONData = dict[str, Any] | list[dict[str, Any]]


class InputJSON(msgspec.Struct, tag_field="type", tag="input_json", forbid_unknown_fields=True):
    """A JSON object or an array of objects, shown to the model as JSON text."""

    data: JSONData


class OutputText(msgspec.Struct, tag_field="type", tag="output_text", forbid_unknown_fields=True):
    text: str


class RefusalText(msgspec.Struct, tag_field="type", tag="refusal", forbid_unknown_fields=True):
    refusal: str


class SystemText(msgspec.Struct, forbid_unknown_fields=True):
    """A developer or system message's text part (`type` required, as in the tagged unions)."""

    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None


UserPart = InputText | InputImage | InputJSON
SystemPart = SystemText
AssistantPart = OutputText | RefusalText
OutputPart = InputText | InputImage


class UserMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: Literal["user"]
    content: str | list[UserPart]
    type: Literal["message"] = "message"


class DeveloperMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: Literal["developer"]
    content: str | list[SystemPart]
    type: Literal["message"] = "message"


class SystemMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: Literal["system"]
    content: str | list[SystemPart]
    type: Literal["message"] = "message"


class AssistantMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: Literal["assistant"]
    content: str | list[AssistantPart]
    type: Literal["message"] = "message"
    phase: Literal["commentary", "final_answer"] | None = None


Status = Literal["in_progress", "completed", "incomplete"]


class FunctionCall(msgspec.Struct, forbid_unknown_fields=True):
    """A call the agent made (or proposes): `arguments` is JSON text, as the model wrote it."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    namespace: str | None = None
    status: Status | None = None


class FunctionCallOutput(msgspec.Struct, forbid_unknown_fields=True):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[OutputPart]
    id: str | None = None
    status: Status | None = None


class CustomToolCall(msgspec.Struct, forbid_unknown_fields=True):
    """A call to a custom tool: its `input` is free-form text."""

    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None
    status: Status | None = None


class CustomToolCallOutput(msgspec.Struct, forbid_unknown_fields=True):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[OutputPart]
    id: str | None = None
    status: Status | None = None


Message = UserMessage | DeveloperMessage | SystemMessage | AssistantMessage
Item = Message | FunctionCall | FunctionCallOutput | CustomToolCall | CustomToolCallOutput
MESSAGES: dict[str, type[Message]] = {
    "user": UserMessage,
    "developer": DeveloperMessage,
    "system": SystemMessage,
    "assistant": AssistantMessage,
}
ITEMS: dict[str, type[Item]] = {
    "function_call": FunctionCall,
    "function_call_output": FunctionCallOutput,
    "custom_tool_call": CustomToolCall,
    "custom_tool_call_output": CustomToolCallOutput,
}

QuestionPart = InputText | InputImage | InputJSON
Instructions = str | list[QuestionPart]


class DecisionExample(msgspec.Struct, forbid_unknown_fields=True):
    """openjev extension: a solved case shown to the model before the input (docs/api.md#worked-examples)."""

    input: Annotated[
        str | list[dict[str, Any]], msgspec.Meta(description="The case, in the shape of the request's `input`.")
    ]
    answer: Annotated[
        bool | str | int,
        msgspec.Meta(
            description="Its answer: true/false (predicate), a choice value (choice), a 0-based level (score)."
        ),
    ]


Examples = Annotated[
    list[DecisionExample] | None,
    msgspec.Meta(description="openjev extension: solved cases for this question (see docs/api.md#worked-examples)."),
]


class Predicate(msgspec.Struct, tag_field="type", tag="predicate", forbid_unknown_fields=True):
    """How likely a statement about the input is true: answered with its probability."""

    kind: ClassVar[AskKind] = "yes_no"
    options_field: ClassVar[str] = "instructions"  # no options to count
    instructions: Instructions
    name: str | None = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return 2

    def duplicate_issues(self, where: Loc) -> list[Issue]:
        return []

    def ask(self, instructions: str, where: Loc) -> Ask:
        return YES_NO.ask(instructions, where=where)

    def answer(self, result: Distribution) -> AnswerPredicate:
        mass = optional(result.label_mass)
        return AnswerPredicate(name=self.name, probability=result.probabilities[0], x_label_mass=mass)


class ChoiceOption(msgspec.Struct, forbid_unknown_fields=True):
    value: ChoiceValue
    description: str | None = None


class Choice(msgspec.Struct, tag_field="type", tag="choice", forbid_unknown_fields=True):
    """Choose one of the choices; a choice without a description shows its value."""

    kind: ClassVar[AskKind] = "choice"
    options_field: ClassVar[str] = "choices"
    choices: list[ChoiceOption]
    instructions: Instructions
    name: str | None = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return len(self.choices)

    def duplicate_issues(self, where: Loc) -> list[Issue]:
        """Each choice must be unique; values are typed, so `"true"` and `true` are two choices."""
        seen: set[tuple[type, ChoiceValue]] = set()
        issues: list[Issue] = []
        for j, choice in enumerate(self.choices):
            key = (type(choice.value), choice.value)
            if key in seen:
                message = f"the choice {echo(choice.value)} is given twice"
                issues.append(Issue((*where, self.options_field, j, "value"), message, "duplicate_choice"))
            seen.add(key)
        return issues

    def ask(self, instructions: str, where: Loc) -> Ask:
        options = [(c.value, c.description if c.description is not None else value_text(c.value)) for c in self.choices]
        return CHOICE.ask(instructions, options, where)

    def answer(self, result: Distribution) -> AnswerChoice:
        return AnswerChoice(
            name=self.name,
            choice=self.choices[result.chosen].value,
            confidence=result.confidence or 0.0,
            probabilities=[
                ChoiceProbability(value=c.value, probability=p)
                for c, p in zip(self.choices, result.probabilities, strict=True)
            ],
            x_label_mass=optional(result.label_mass),
        )


class Level(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    description: str | None = None

    @property
    def text(self) -> str:
        """What the model is shown: the label, and its description after a colon when there is one."""
        return self.label if self.description is None else f"{self.label}: {self.description}"


class Score(msgspec.Struct, tag_field="type", tag="score", forbid_unknown_fields=True):
    """Rate the input on ordered levels, the lowest first; answered with the expected 0-based level."""

    kind: ClassVar[AskKind] = "scale"
    options_field: ClassVar[str] = "levels"
    levels: list[Level]
    instructions: Instructions
    name: str | None = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return len(self.levels)

    def duplicate_issues(self, where: Loc) -> list[Issue]:
        return []  # levels are ordered: two with the same label are still two levels

    def ask(self, instructions: str, where: Loc) -> Ask:
        return SCALE.ask(instructions, [level.text for level in self.levels], where)

    def answer(self, result: Distribution) -> AnswerScore:
        return AnswerScore(
            name=self.name,
            score=result.expected or 0.0,
            confidence=result.confidence or 0.0,
            probabilities=[
                ScoreProbability(value=i, label=level.label, probability=p)
                for i, (level, p) in enumerate(zip(self.levels, result.probabilities, strict=True))
            ],
            x_label_mass=optional(result.label_mass),
        )


Question = Predicate | Choice | Score


class PromptCacheOptions(msgspec.Struct, forbid_unknown_fields=True):
    """Accepted and checked; openjev's prefix cache is automatic (docs/api.md)."""

    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] | None = None


SAFETY_IDENTIFIER_CHARS = 128


class DecisionRequest(msgspec.Struct):
    """POST /v1/decisions. `input` items are checked one by one after this decoding (`input.py`)."""

    model: Annotated[str, msgspec.Meta(examples=["jev-latest"])]
    input: Annotated[
        str | list[dict[str, Any]],
        msgspec.Meta(description="A text, or an ordered array of messages, tool calls and tool outputs."),
    ]
    questions: list[Question]
    safety_identifier: Annotated[str, msgspec.Meta(max_length=SAFETY_IDENTIFIER_CHARS)] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    x_debias: Annotated[
        DebiasMode | None,
        msgspec.Meta(description="openjev extension: bias removal for this request (see docs/quality.md)."),
    ] = None
    x_label_mass: Annotated[
        bool,
        msgspec.Meta(description="openjev extension: report each answer's `x_label_mass` (see docs/api.md)."),
    ] = False


def value_text(value: ChoiceValue) -> str:
    """A choice's value as the model reads it: a string as it is, a boolean as JSON (`true`)."""
    return ("true" if value else "false") if isinstance(value, bool) else value


# --- The response -------------------------------------------------------------------------------


class AnswerPredicate(msgspec.Struct, tag_field="type", tag="predicate"):
    name: str | None
    probability: float
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


class ChoiceProbability(msgspec.Struct):
    value: ChoiceValue
    probability: float


class AnswerChoice(msgspec.Struct, tag_field="type", tag="choice"):
    name: str | None
    choice: ChoiceValue
    confidence: float
    probabilities: list[ChoiceProbability]
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


class ScoreProbability(msgspec.Struct):
    value: int
    label: str
    probability: float


class AnswerScore(msgspec.Struct, tag_field="type", tag="score"):
    name: str | None
    score: float
    confidence: float
    probabilities: list[ScoreProbability]
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


class AnswerRefusal(msgspec.Struct, tag_field="type", tag="refusal"):
    """The server declined this question under its refusal policy; `x_reason` says why."""

    name: str | None
    x_reason: str | msgspec.UnsetType = msgspec.UNSET
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


Answer = AnswerPredicate | AnswerChoice | AnswerScore | AnswerRefusal


class InputTokensDetails(msgspec.Struct):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(msgspec.Struct):
    reasoning_tokens: int


class DecisionUsage(msgspec.Struct):
    """What each field counts: docs/api.md (all integers, as the SDK requires)."""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class Decision(msgspec.Struct):
    answers: list[Answer]
    model: str
    usage: DecisionUsage
