"""Each decision's prompt token ids as the server builds them (its date-facts setting), in several option orders.

Runs in the project's environment
(`uv run python benchmarks/finetune/render_plans.py IN OUT [EXTRA] [--examples SHARE]`): training and
evaluation then read the model on the very tokens `openjev serve` sends it. Every item gets the order
sent and its reverse (what the default `reverse` bias removal asks), and EXTRA random orders more
(for training, so that no answer is tied to a position).

`--examples SHARE` gives that share of the items worked examples, as `openjev eval --examples` sends
them: one solved case per option, in the order of the options, each another item of the same kind
whose answer is that option (described the same way) and whose text is not mostly the item's own.
An item whose options cannot all be covered so goes without. The model then learns to decide with
examples in the prompt, not only without.
"""

import collections
import json
import os
import random
import sys

import msgspec

from openjev.bootstrap import build_runtime, verified_labels
from openjev.domain.debiasing import option_orders
from openjev.domain.decision import Document, Example
from openjev.domain.kinds import CHOICE
from openjev.domain.prompt import build_plan
from openjev.settings import load_settings

USAGE = "usage: render_plans.py IN OUT [EXTRA] [--examples SHARE]"


def kind_of(item: dict) -> str:
    parts = str(item["id"]).split("-")
    return parts[1] if parts[0] == "syn" else parts[0]


def alike(a: str, b: str) -> bool:
    """Whether two cases share most of their words: the generators reuse texts, and an example that
    repeats the case would teach copying its answer instead of applying the rule."""
    x, y = set(a.lower().split()), set(b.lower().split())
    return len(x & y) > 0.8 * min(len(x), len(y))


def solved_examples(
    item: dict, by_answer: dict[tuple[str, str], list[dict]], rnd: random.Random
) -> tuple[Example, ...]:
    """One solved case per option of `item`, from the other items of its kind; () when one is missing.

    `by_answer`: the file's items by kind and gold answer, in file order.
    """
    examples = []
    for index, (key, text) in enumerate(item["question"]["criteria"].items()):
        found = [
            other
            for other in by_answer[(kind_of(item), key)]
            if other is not item
            and other["question"]["criteria"].get(key) == text
            and not alike(other["state"], item["state"])
        ]
        if not found:
            return ()
        examples.append(Example(state=Document(text=rnd.choice(found)["state"]), answer=index))
    return tuple(examples)


def load(path: str) -> list[dict]:
    """The file's decisions; every state a text, since only those render here (and serve as examples)."""
    with open(path) as source:
        items = [json.loads(line) for line in source]
    for item in items:
        if not isinstance(item["state"], str):
            raise SystemExit(f"{item['id']}: only text states are rendered here")
    return items


def by_kind_and_answer(items: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """The items by kind and gold answer, in file order: where `solved_examples` looks for cases."""
    found: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for item in items:
        found[(kind_of(item), item["gold"])].append(item)
    return found


def main() -> None:
    args = sys.argv[1:]
    share = 0.0
    if "--examples" in args:
        at = args.index("--examples")
        try:
            share = float(args[at + 1])
        except (IndexError, ValueError):
            raise SystemExit(USAGE) from None
        del args[at : at + 2]
    if len(args) not in (2, 3):
        raise SystemExit(USAGE)
    settings = load_settings(os.environ)
    codec = build_runtime(settings).load_codec()
    labels = verified_labels(codec, settings)
    extra = int(args[2]) if len(args) > 2 else 0
    rnd = random.Random(7)
    items = load(args[0])
    by_answer = by_kind_and_answer(items)
    picker = random.Random(11)  # its own stream: without --examples the orders drawn stay the same
    with open(args[1], "w") as out:
        for item in items:
            question = item["question"]
            keys = list(question["criteria"])
            n = len(keys)
            orders = list(option_orders(n, max_orders=2))  # what `reverse` asks
            for _ in range(extra):
                order = list(range(n))
                rnd.shuffle(order)
                orders.append(tuple(order))
            ask = CHOICE.ask(question["instructions"], list(question["criteria"].items()))
            if share and picker.random() < share:
                ask = msgspec.structs.replace(ask, examples=solved_examples(item, by_answer, picker))
            plan = build_plan(
                Document(text=item["state"]),
                [ask],
                codec,
                labels,
                lambda _ask, orders=orders: orders,
                dates=settings.date_facts,
            )
            branches = [
                {"suffix": list(b.suffix_ids), "labels": list(b.label_ids), "order": list(b.order)}
                for b in plan.branches
            ]
            row = {"id": item["id"], "gold": keys.index(item["gold"]), "prefix": list(plan.prefix_ids)}
            if ask.examples:
                row["examples"] = len(ask.examples)
            out.write(json.dumps({**row, "branches": branches}) + "\n")


if __name__ == "__main__":
    main()
