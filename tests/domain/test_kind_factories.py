"""Each kind's factory makes only asks that keep its kind's invariants."""

from __future__ import annotations

import pytest

from openjev.domain.kinds import CHOICE, KINDS, SCALE, YES_NO, rules


def test_a_yes_no_ask_has_yes_then_no() -> None:
    ask = YES_NO.ask("Refund?", yes="the user wants money back", where=("q",))
    assert [(o.key, o.text) for o in ask.options] == [(True, "the user wants money back"), (False, None)]
    assert (ask.kind, ask.instructions, ask.where) == ("yes_no", "Refund?", ("q",))
    assert rules(ask) is YES_NO


def test_a_choice_needs_distinct_typed_keys() -> None:
    ask = CHOICE.ask(None, [("true", "the text"), (True, "the boolean")])  # typed: two different keys
    assert [o.key for o in ask.options] == ["true", True]
    with pytest.raises(ValueError, match="distinct keys"):
        CHOICE.ask(None, [("billing", "a"), ("billing", "b")])


def test_a_scale_keys_its_levels_by_position_lowest_first() -> None:
    ask = SCALE.ask("How urgent?", ["Routine", "Urgent", None])
    assert [(o.key, o.text) for o in ask.options] == [(0, "Routine"), (1, "Urgent"), (2, None)]


def test_every_kind_is_registered_under_its_name() -> None:
    assert {name: rules.kind for name, rules in KINDS.items()} == {k: k for k in ("yes_no", "choice", "scale")}
    assert [k.rotatable for k in (YES_NO, CHOICE, SCALE)] == [False, True, False]
    assert [k.calibratable for k in (YES_NO, CHOICE, SCALE)] == [True, True, False]
