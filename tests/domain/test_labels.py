from __future__ import annotations

import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.bootstrap import verified_labels
from openjev.domain.errors import StartupError
from openjev.domain.labels import TooFewLabels, candidate_labels, label_context, verify_labels
from openjev.settings import load_settings


def test_candidates_are_letters_then_letter_pairs() -> None:
    labels = list(candidate_labels())
    assert labels[:3] == ["A", "B", "C"]
    assert labels[25:28] == ["Z", "AA", "AB"]
    assert len(labels) == 26 + 26 * 26
    assert not any(ch.isdigit() for label in labels for ch in label)


def test_verified_labels_are_single_tokens_in_the_answer_context() -> None:
    codec = ChatMLByteCodec()
    labels = verify_labels(codec, 255)
    assert labels.capacity == 255
    assert len(set(labels.token_ids)) == 255
    context = label_context(codec)
    base = codec.encode_template(context)
    for label, token in zip(labels.labels, labels.token_ids, strict=True):
        assert codec.encode_template(context + " " + label) == [*base, token]
    assert "10" not in labels.labels and "64" not in labels.labels


class _FewPairs(ChatMLByteCodec):
    """A tokenizer that knows single letters and only three letter pairs as tokens."""

    def __init__(self) -> None:
        super().__init__()
        keep = {" A", " B", " Yes", " No", *(" " + c for c in "CDEFGHIJKLMNOPQRSTUVWXYZ"), " AA", " AB", " AC"}
        self._pieces = {k: v for k, v in self._pieces.items() if k.decode() in keep}


def test_a_model_without_enough_labels_refuses_to_start_naming_its_capacity() -> None:
    with pytest.raises(StartupError, match="supports only 29 single-token answer labels") as info:
        verify_labels(_FewPairs(), 64)
    assert isinstance(info.value, TooFewLabels) and (info.value.supported, info.value.wanted) == (29, 64)
    assert "OPENJEV_" not in str(info.value)  # the domain names no setting: start-up does
    with pytest.raises(StartupError, match="OPENJEV_MAX_OPTIONS=64 needs 64: set OPENJEV_MAX_OPTIONS to 29 or less"):
        verified_labels(_FewPairs(), load_settings({}))
    assert verify_labels(_FewPairs(), 29).labels[-3:] == ("AA", "AB", "AC")


class _MergingAnswer(ChatMLByteCodec):
    """A tokenizer where ':' and ' A' merge into one token: ' A' cannot be read after `Answer:`."""

    def encode_template(self, text: str) -> list[int]:
        ids = super().encode_template(text)
        colon, space_a = super().encode_template(":")[0], super().encode_template(" A")[-1]
        merged: list[int] = []
        for token in ids:
            if merged and merged[-1] == colon and token == space_a:
                merged[-1] = 99_999
            else:
                merged.append(token)
        return merged


def test_a_label_that_merges_with_the_context_is_skipped() -> None:
    labels = verify_labels(_MergingAnswer(), 30)
    assert "A" not in labels.labels
    assert labels.labels[:2] == ("B", "C")


def test_yes_and_no_are_verified_too() -> None:
    codec = ChatMLByteCodec()
    labels = verify_labels(codec, 2)
    context = label_context(codec)
    assert codec.encode_template(context + " Yes")[-1] == labels.yes_id
    assert codec.encode_template(context + " No")[-1] == labels.no_id
    assert labels.yes_id not in labels.token_ids and labels.no_id not in labels.token_ids
