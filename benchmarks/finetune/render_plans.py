"""Each decision's prompt token ids as the server builds them (its date-facts setting), in several option orders.

Runs in the project's environment (`uv run python benchmarks/finetune/render_plans.py IN OUT [EXTRA]`):
training and evaluation then read the model on the very tokens `openjev serve` sends it. Every item
gets the order sent and its reverse (what the default `reverse` bias removal asks), and EXTRA random
orders more (for training, so that no answer is tied to a position).
"""

import json
import os
import random
import sys

from openjev.bootstrap import build_runtime, verified_labels
from openjev.domain.debiasing import option_orders
from openjev.domain.decision import Document
from openjev.domain.kinds import CHOICE
from openjev.domain.prompt import build_plan
from openjev.settings import load_settings


def main() -> None:
    settings = load_settings(os.environ)
    codec = build_runtime(settings).load_codec()
    labels = verified_labels(codec, settings)
    extra = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rnd = random.Random(7)
    with open(sys.argv[1]) as source, open(sys.argv[2], "w") as out:
        for line in source:
            item = json.loads(line)
            question = item["question"]
            keys = list(question["criteria"])
            n = len(keys)
            orders = list(option_orders(n, max_orders=2))  # what `reverse` asks
            for _ in range(extra):
                order = list(range(n))
                rnd.shuffle(order)
                orders.append(tuple(order))
            ask = CHOICE.ask(question["instructions"], list(question["criteria"].items()))
            if not isinstance(item["state"], str):
                raise SystemExit(f"{item['id']}: only text states are rendered here")
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
            out.write(json.dumps({**row, "branches": branches}) + "\n")


if __name__ == "__main__":
    main()
