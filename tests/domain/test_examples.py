"""Worked examples: where their turns go, how each kind's answer reads, how a conversation case is shown."""

from __future__ import annotations

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.domain.decision import Ask, Conversation, Document, Example
from openjev.domain.examples import case_text, example_turns, messages_with_examples
from openjev.domain.kinds import CHOICE, SCALE, YES_NO
from openjev.domain.labels import verify_labels
from openjev.domain.ports import ChatMessage, ToolCall
from openjev.domain.prompt import build_plan, prompt_text

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
SYSTEM = ChatMessage(role="system", content="You are the support desk.")
USER = ChatMessage(role="user", content="I was charged twice.")


def _choice(*examples: Example) -> Ask:
    ask = CHOICE.ask("Which team?", [("billing", "Payments and refunds"), ("tech", "Software bugs")])
    return Ask(kind=ask.kind, instructions=ask.instructions, options=ask.options, examples=examples)


def test_examples_go_after_the_leading_system_turns_and_before_the_rest() -> None:
    ask = _choice(Example(Document("Refund my order"), 0), Example(Document("The app crashes"), 1))
    messages = messages_with_examples([SYSTEM, USER], [ask])
    assert [m.role for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0] == SYSTEM and messages[-1] == USER
    assert (
        messages[1].content.startswith("Solved example.") and "<data>\nRefund my order\n</data>" in messages[1].content
    )
    assert messages[1].content.endswith("\n\nQuestion: Which team?")
    assert (messages[2].content, messages[4].content) == ("Answer: Payments and refunds", "Answer: Software bugs")


def test_without_examples_the_messages_are_unchanged() -> None:
    assert messages_with_examples([SYSTEM, USER], [_choice()]) == [SYSTEM, USER]


def test_each_kind_answers_in_words_never_with_a_label() -> None:
    case = Document("Where is my parcel?")
    yes_no = YES_NO.ask(None)
    scale = SCALE.ask("How urgent?", ["Routine", "Urgent"])
    plain = CHOICE.ask(None, [("billing", "billing"), ("tech", "tech")])
    assert example_turns(yes_no, Example(case, 1))[1].content == "Answer: No"
    assert example_turns(yes_no, Example(case, 0))[0].content.endswith("Question: Is the answer yes?")
    assert example_turns(scale, Example(case, 1))[1].content == "Answer: Urgent"
    assert example_turns(plain, Example(case, 1))[1].content == "Answer: tech"


def test_a_conversation_case_is_shown_as_one_line_per_turn_with_its_tool_calls() -> None:
    call = ToolCall(call_id="c1", name="shell", arguments={"cmd": "rm -rf /prod"})
    state = Conversation(
        messages=(
            ChatMessage(role="user", content="Clean up the disk."),
            ChatMessage(role="assistant", content="", tool_calls=(call,)),
        )
    )
    assert case_text(state) == 'user: Clean up the disk.\nassistant calls the tool shell with {"cmd": "rm -rf /prod"}'


def test_examples_sit_in_the_shared_prefix_so_requests_sharing_them_share_it() -> None:
    examples = (Example(Document("Refund my order"), 0), Example(Document("The app crashes"), 1))
    first = build_plan(Document("Charged twice"), [_choice(*examples)], CODEC, LABELS)
    second = build_plan(Document("Login fails"), [_choice(*examples)], CODEC, LABELS)
    bare = build_plan(Document("Charged twice"), [_choice()], CODEC, LABELS)
    shared = 0
    while first.prefix_ids[shared] == second.prefix_ids[shared]:
        shared += 1
    assert shared > len(bare.prefix_ids)  # the examples' turns, and more, are common to both requests
    assert 0 < first.head_tokens == second.head_tokens <= shared  # the start warmed on its own
    assert first.prefix_ids[: first.head_tokens] == second.prefix_ids[: second.head_tokens]
    head = CODEC.decode(list(first.prefix_ids[: first.head_tokens]))
    assert head.endswith("Answer: Software bugs<|im_end|>\n<|im_start|>user\n")  # up to the state's own text
    assert bare.head_tokens == 0
    assert first.branches == bare.branches  # the question turn itself does not change
    text = prompt_text(Document("Charged twice"), [_choice(*examples)], LABELS)
    assert len(text.messages) == 5


def test_the_head_keeps_a_transcripts_system_turn_first() -> None:
    ask = _choice(Example(Document("Refund my order"), 0))
    plan = build_plan(Conversation(messages=(SYSTEM, USER)), [ask], CODEC, LABELS)
    head = CODEC.decode(list(plan.prefix_ids[: plan.head_tokens]))
    assert head.startswith("<|im_start|>system\nYou are the support desk.<|im_end|>")
    assert "Solved example." in head and "I was charged twice." not in head
