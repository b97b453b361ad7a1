"""Worked examples: a caller's solved cases, shown to the model as earlier turns of the conversation.

Each example is a user turn (its case framed as data, then the ask's instructions) and an assistant
turn with the right answer in words: the option's text, Yes or No, the level's text. Never a
letter: each option order (bias removal) shows the real question's options under other letters,
while the examples sit once in the shared prefix.

They go before the state, after its leading system turns, so that requests sending the same
examples share that part of the prompt and a prefix cache reuses it; measured against placing them
after the state in docs/quality.md. See docs/prompt-format.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from openjev.domain.decision import Ask, Conversation, Example, State
from openjev.domain.kinds import rules
from openjev.domain.ports import ChatMessage
from openjev.domain.state import framed_data

EXAMPLE_TURN = "Solved example. {framed}"
EXAMPLE_QUESTION = "\n\nQuestion: {question}"
EXAMPLE_ANSWER = "Answer: {answer}"

Facts = Callable[[Sequence[str]], str | None]
"""The computed facts about some texts (the date facts), or None: added under an example's data."""


def messages_with_examples(
    messages: Sequence[ChatMessage], asks: Sequence[Ask], facts: Facts | None = None
) -> list[ChatMessage]:
    """The state's messages with every ask's examples before them, after the state's leading system turns."""
    turns = [turn for ask in asks for example in ask.examples for turn in example_turns(ask, example, facts)]
    if not turns:
        return list(messages)
    lead = leading_system(messages)
    return [*messages[:lead], *turns, *messages[lead:]]


def leading_system(messages: Sequence[ChatMessage]) -> int:
    """How many system turns the messages open with: the examples go after them."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    return lead


def example_turns(ask: Ask, example: Example, facts: Facts | None = None) -> tuple[ChatMessage, ChatMessage]:
    """The user turn holding the case and the question, and the assistant turn answering it."""
    kind = rules(ask)
    question = kind.default_instructions if ask.instructions is None else ask.instructions
    text = case_text(example.state)
    found = facts([text, question]) if facts is not None else None
    user = EXAMPLE_TURN.format(framed=framed_data(text, found)) + EXAMPLE_QUESTION.format(question=question)
    answer = EXAMPLE_ANSWER.format(answer=kind.answer_text(ask, example.answer))
    return ChatMessage(role="user", content=user), ChatMessage(role="assistant", content=answer)


def case_text(state: State) -> str:
    """An example's state as text: a document as it is, a conversation as one line per turn.

    A conversation cannot render through the chat template here: its turns would join the real ones.
    """
    if not isinstance(state, Conversation):
        return state.text
    lines: list[str] = []
    for message in state.messages:
        if message.content:
            lines.append(f"{message.role}: {message.content}")
        for call in message.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            lines.append(f"{message.role} calls the tool {call.name} with {arguments}")
    return "\n".join(lines)
