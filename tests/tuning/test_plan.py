"""How many steps a run plans: `--steps`, `--epochs` passes, or with only `--max-minutes` as many as fit."""

from __future__ import annotations

import pytest

from openjev.tuning.session import FILL_EPOCHS, Options, planned_steps

pytestmark = pytest.mark.needs_torch


def options(steps: int | None = None, epochs: float | None = None) -> Options:
    return Options(
        train="t.jsonl", eval=None, eval_share=0.2, steps=steps, batch=4, epochs=epochs, rank=16, layers=None,
        learning_rate=1e-3, seed=0, dtype="auto", name="t",
    )  # fmt: skip


def test_steps_given_are_kept_with_or_without_a_deadline() -> None:
    assert planned_steps(options(steps=7, epochs=2), 240, filling=True) == 7


def test_passes_given_are_kept_with_or_without_a_deadline() -> None:
    assert planned_steps(options(epochs=2), 240, filling=False) == 120
    assert planned_steps(options(epochs=2), 240, filling=True) == 120


def test_without_a_deadline_three_passes() -> None:
    assert planned_steps(options(), 240, filling=False) == 180


def test_a_deadline_alone_plans_up_to_the_most_passes_for_the_trainer_to_cut_to_the_time() -> None:
    assert planned_steps(options(), 240, filling=True) == round(FILL_EPOCHS * 240 / 4)
