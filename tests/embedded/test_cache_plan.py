"""The deterministic cache plan (pure): where llama.cpp evaluates from, and when a cut is needed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from openjev.adapters.common_prefix import common_prefix_length
from openjev.adapters.embedded.cache_plan import (
    ALIGN,
    MIN_BATCH,
    CachePlan,
    canonical_start,
    plan_score,
    warm_prefix,
)

VOCAB = 100
PROMPT = tuple(range(40))


def llama_reuse(held: tuple[int, ...], prompt: tuple[int, ...]) -> int:
    """llama.cpp's prompt cache: the common prefix, less one token when it is the whole prompt."""
    return min(common_prefix_length(held, prompt), len(prompt) - 1)


def test_a_cold_slot_evaluates_from_the_start_without_a_cut() -> None:
    assert plan_score((), PROMPT, vocab_size=VOCAB) == CachePlan(start=0)


def test_a_prefix_that_ends_between_groups_is_cut_back_to_the_last_whole_group() -> None:
    held = (*PROMPT[:21], 99, 98)
    plan = plan_score(held, PROMPT, vocab_size=VOCAB)
    assert plan == CachePlan(start=16, cut=(*PROMPT[:16], PROMPT[16] + 1))


def test_a_prefix_ending_on_a_group_boundary_needs_no_cut() -> None:
    held = (*PROMPT[:24], 99)
    assert plan_score(held, PROMPT, vocab_size=VOCAB) == CachePlan(start=24)


def test_the_same_prompt_again_re_evaluates_at_least_a_minimum_batch() -> None:
    plan = plan_score(PROMPT, PROMPT, vocab_size=VOCAB)
    assert plan.start == 32 and len(PROMPT) - plan.start >= MIN_BATCH
    assert plan.cut == (*PROMPT[:32], PROMPT[32] + 1)


def test_an_unknown_slot_is_cut_to_nothing() -> None:
    assert plan_score(None, PROMPT, vocab_size=VOCAB) == CachePlan(start=0, cut=(PROMPT[0] + 1,))
    assert plan_score(None, (VOCAB - 1, 5), vocab_size=VOCAB).cut == (VOCAB - 2,)  # stays in the vocabulary


def test_a_prompt_shorter_than_a_minimum_batch_is_evaluated_cold() -> None:
    short = PROMPT[:5]
    assert plan_score(short, short, vocab_size=VOCAB).start == 0


def test_a_warm_up_covers_whole_groups() -> None:
    assert warm_prefix(PROMPT[:21]) == PROMPT[:16]
    assert warm_prefix(PROMPT[:7]) == ()


def test_which_reuse_gives_the_cold_answer() -> None:
    assert canonical_start(0, 3) and canonical_start(16, 16 + MIN_BATCH)
    assert not canonical_start(16, 16 + MIN_BATCH - 1)
    assert not canonical_start(ALIGN + 1, 100)
    assert not canonical_start(None, 100)


tokens = st.lists(st.integers(0, 3), max_size=60).map(tuple)


@given(held=st.one_of(st.none(), tokens), prompt=tokens.filter(bool))
def test_after_the_plan_llama_cpp_reuses_exactly_a_canonical_start(
    held: tuple[int, ...] | None, prompt: tuple[int, ...]
) -> None:
    """Whatever the slot holds (or if that is unknown), the cut leaves llama.cpp one choice."""
    plan = plan_score(held, prompt, vocab_size=VOCAB)
    cache = held if held is not None else (*prompt, 2, 1)  # an unknown slot may hold anything
    if plan.cut is not None:
        assert len(plan.cut) == plan.start + 1 and plan.cut[:-1] == prompt[: plan.start]
        cache = plan.cut
    assert llama_reuse(cache, prompt) == plan.start
    assert canonical_start(plan.start, len(prompt))
