"""Labelled items become exactly the prompts the server sends: the planner's branches, the gold's label."""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.bootstrap import verified_labels
from openjev.contracts.systemone.parsing import to_decision
from openjev.contracts.systemone.wire import SystemOneRequest
from openjev.evaluation_plan import EvaluatorConfig, plan
from openjev.quality.dataset import DatasetError, load_items
from openjev.settings import load_settings
from openjev.tuning.examples import held_out_slice, render
from tests.tuning.labelled import team_items, write_jsonl

CONFIG = EvaluatorConfig(debias="reverse", date_facts=True)


def test_each_item_is_read_in_the_servers_orders_on_the_servers_tokens(tmp_path: Path) -> None:
    codec = ChatMLByteCodec()
    labels = verified_labels(codec, load_settings({}))
    items = load_items(write_jsonl(tmp_path / "t.jsonl", team_items(4, seed=1)))
    rendered = render(items, codec, labels, CONFIG, source="t.jsonl")
    for item, training in zip(items, rendered, strict=True):
        request = SystemOneRequest(model="jev-latest", state=item.state, questions={"q": item.question})
        served = plan(to_decision(request), codec, labels, CONFIG).plan
        assert training.prefix == served.prefix_ids
        assert [r.suffix for r in training.readings] == [b.suffix_ids for b in served.branches]
        assert [r.order for r in training.readings] == [(0, 1), (1, 0)]  # the order sent, then its reverse
        gold = ["team_a", "team_b"].index(str(item.gold))
        assert training.gold == gold
        assert [r.labels[r.position_of(gold)] for r in training.readings] == [
            b.label_ids[b.order.index(gold)] for b in served.branches
        ]


def test_an_item_the_server_would_refuse_is_named(tmp_path: Path) -> None:
    codec = ChatMLByteCodec()
    labels = verified_labels(codec, load_settings({}))
    items = load_items(write_jsonl(tmp_path / "t.jsonl", team_items(2, seed=1)))
    small = EvaluatorConfig(debias="reverse", branch_context=20)
    with pytest.raises(DatasetError, match=r"t.jsonl, item team-1-0: the server would refuse it"):
        render(items, codec, labels, small, source="t.jsonl")


def test_the_held_out_slice_is_the_same_every_run_and_never_empty(tmp_path: Path) -> None:
    items = load_items(write_jsonl(tmp_path / "t.jsonl", team_items(10, seed=1)))
    train, evals = held_out_slice(items, 0.2, seed=3)
    assert (train, evals) == held_out_slice(items, 0.2, seed=3)
    assert len(evals) == 2 and len(train) == 8 and not set(map(id, train)) & set(map(id, evals))
    assert len(held_out_slice(items[:2], 0.01, seed=0)[1]) == 1
    with pytest.raises(DatasetError, match="at least 2"):
        held_out_slice(items[:1], 0.2, seed=0)
