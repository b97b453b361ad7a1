"""Train a LoRA adapter on rendered decisions, reading the answer as the server does; evaluate before and after.

    python train_lora.py MODEL_DIR TRAIN.ids.jsonl OUT_DIR [--steps 400] [--lr 1e-4] [--rank 16]
                         [--eval NAME=FILE.ids.jsonl ...] [--base-eval] [--checkpoint-above TOKENS]

One item per step, in one of its rendered orders drawn at random. The loss is the cross-entropy of
the gold option among the options' label tokens only (the distribution openjev reports), not over
the whole vocabulary: the adapter learns which option to pick, nothing about other text. Evaluation
averages the label log-probabilities of the order sent and its reverse, as the `reverse` bias
removal does, and writes each item's distribution to OUT_DIR.NAME.json.

Activations are recomputed in the backward pass (gradient checkpointing) to bound memory, which
more than doubled a step's time here. `--checkpoint-above TOKENS` recomputes them only for
sequences longer than that: the gradients are the same, shorter steps are faster, and the long
prompts that worked examples make still fit (without it, a step on an 1,833-token prompt took over
23 GB here).
"""

import argparse
import collections
import json
import math
import random
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def kind_of(item_id: str) -> str:
    parts = item_id.split("-")
    return parts[1] if parts[0] == "syn" else parts[0]


def answer(model, row: dict) -> torch.Tensor:
    """Log-probabilities by option, the orders' label log-probabilities averaged (one batch).

    The same combination as openjev's `combine_orders`, in torch: this script runs in the training
    environment, where openjev is not installed.
    """
    seqs = [row["prefix"] + b["suffix"] for b in row["branches"]]
    width = max(map(len, seqs))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    logits = model(input_ids=ids, attention_mask=mask).logits.float()
    per_order = []
    for k, branch in enumerate(row["branches"]):
        by_position = torch.log_softmax(logits[k, len(seqs[k]) - 1, branch["labels"]], -1)
        by_option = torch.empty_like(by_position)
        by_option[torch.tensor(branch["order"])] = by_position
        per_order.append(by_option)
    return torch.log_softmax(torch.stack(per_order).mean(0), -1)


def evaluate(model, rows: list[dict], tag: str, out: str) -> None:
    model.eval()
    right, total, p_gold, answers = collections.Counter(), collections.Counter(), [], {}
    start = time.time()
    with torch.no_grad():
        for row in rows:
            logp = answer(model, row)
            kind = kind_of(row["id"])
            total[kind] += 1
            right[kind] += int(logp.argmax()) == row["gold"]
            p_gold.append(float(logp[row["gold"]].exp()))
            answers[row["id"]] = [float(x) for x in logp.exp()]
    kinds = " ".join(f"{k}:{right[k]}/{total[k]}" for k in sorted(total))
    print(
        f"[{tag}] {sum(right.values())}/{len(rows)} p_gold={sum(p_gold) / len(p_gold):.3f} {kinds} "
        f"({time.time() - start:.0f}s)",
        flush=True,
    )
    with open(f"{out}.{tag}.json", "w") as f:
        json.dump(answers, f)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("train")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--eval", action="append", default=[], help="NAME=FILE.ids.jsonl")
    parser.add_argument("--base-eval", action="store_true")
    parser.add_argument("--checkpoint-above", type=int, default=0, metavar="TOKENS")
    args = parser.parse_args()
    torch.manual_seed(0)
    train = load(args.train)
    evals = [(name, load(path)) for name, path in (e.split("=", 1) for e in args.eval)]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    if args.base_eval:
        for name, rows in evals:
            evaluate(model, rows, f"base-{name}", args.out)
    model.enable_input_require_grads()
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=MODULES, lora_dropout=0.05)
    model = get_peft_model(model, lora)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    rnd = random.Random(1)
    checkpointing = False
    start, losses = time.time(), []
    for step in range(args.steps):
        model.train()
        warm = min(1.0, (step + 1) / 20)
        for group in optimizer.param_groups:
            group["lr"] = args.lr * warm * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        row = train[step % len(train)]
        branch = rnd.choice(row["branches"])
        long = len(row["prefix"]) + len(branch["suffix"]) > args.checkpoint_above
        if long != checkpointing:
            if long:
                model.gradient_checkpointing_enable()
            else:
                model.gradient_checkpointing_disable()
            checkpointing = long
        logits = model(input_ids=torch.tensor([row["prefix"] + branch["suffix"]])).logits[0, -1].float()
        loss = -torch.log_softmax(logits[branch["labels"]], -1)[branch["order"].index(row["gold"])]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if (step + 1) % 25 == 0:
            print(f"step {step + 1} loss {sum(losses[-25:]) / 25:.3f} {time.time() - start:.0f}s", flush=True)
    model.save_pretrained(args.out)
    for name, rows in evals:
        evaluate(model, rows, f"lora-{name}", args.out)


if __name__ == "__main__":
    main()
