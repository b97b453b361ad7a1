"""The training loop: a few items a step, read as the server reads it; evaluation, checkpoints, the best kept.

A step takes a few training items (`--batch`), each in one of the option orders the server asks it
in (drawn at random), and lowers their mean cross-entropy of the gold option among the prompt's
label tokens: the distribution openjev reports, nothing about other text. Evaluation reads every
order and combines them as the server does (`combine_orders`), so "accuracy" is the served
answer's. Training stops at the planned step or when the final evaluation would overrun the time
budget, and the LoRA factors that scored best on the evaluation items are the ones written. A
checkpoint (factors, optimizer, step, best so far) is written atomically every two minutes and on
Ctrl-C, so `--resume` continues.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from openjev.adapters.embedded.tuned import Figures
from openjev.domain.debiasing import combine_orders
from openjev.tuning.decoder import Decoder
from openjev.tuning.frozen import FrozenSet

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_SECONDS = 120.0
WARMUP_STEPS = 10


@dataclass(frozen=True)
class Plan:
    steps: int  # as asked; a deadline may lower it (`Progress.steps`)
    batch: int  # items a step averages its loss over
    learning_rate: float
    seed: int
    evaluations: int  # evaluations during training, besides the one before and the one at the end
    deadline: float | None  # time.monotonic() by which the command must be done


@dataclass
class Progress:
    """What a checkpoint holds besides the factors and the optimizer: resumable state."""

    step: int = 0
    steps: int = 0  # the steps planned: the plan's, or fewer to end the schedule at the deadline
    best_accuracy: float = -1.0
    best_loss: float = math.inf
    best_step: int = 0
    best_state: dict[str, torch.Tensor] = field(default_factory=dict)
    best_answers: dict[str, list[float]] = field(default_factory=dict)
    best_unchanged: float | None = None
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # training time spent before this run (resumed runs add up)


@dataclass(frozen=True)
class Evaluated:
    figures: Figures
    answers: dict[str, list[float]]  # item id -> the served distribution over its options
    seconds: float


EVAL_PACK = 8  # readings an evaluation pass packs together


def evaluate(decoder: Decoder, items: FrozenSet) -> Evaluated:
    """The server's answer to each item (its orders combined), accuracy, stability under reversal, loss."""
    started = time.monotonic()
    right, stable, paired, loss = 0, 0, 0, 0.0
    answers: dict[str, list[float]] = {}
    wanted = [(index, number) for index, item in enumerate(items.items) for number in range(len(item.readings))]
    read: dict[tuple[int, int], list[float]] = {}
    with torch.no_grad():
        for first in range(0, len(wanted), EVAL_PACK):
            pack = wanted[first : first + EVAL_PACK]
            parts = [items.own(index, number) for index, number in pack]
            labels = [items.items[index].readings[number].labels for index, number in pack]
            for key, logits in zip(pack, decoder.packed_logits(items.head, parts, labels), strict=True):
                read[key] = logits.tolist()
    for index, item in enumerate(items.items):
        per_order = [(reading.order, read[index, number]) for number, reading in enumerate(item.readings)]
        combined = combine_orders(per_order)
        answers[item.id] = [math.exp(x) for x in combined]
        right += max(range(len(combined)), key=combined.__getitem__) == item.gold
        loss -= combined[item.gold]
        if len(per_order) >= 2:
            picks = [_pick(order, logits) for order, logits in per_order[:2]]
            paired += 1
            stable += picks[0] == picks[1]
    count = max(len(items), 1)
    figures = Figures(
        accuracy=right / count,
        unchanged_when_reversed=stable / paired if paired else None,
        loss=loss / count,
        items=len(items),
    )
    return Evaluated(figures, answers, time.monotonic() - started)


def _pick(order: tuple[int, ...], logits: Sequence[float]) -> int:
    """The option a reading alone would answer."""
    return order[max(range(len(logits)), key=logits.__getitem__)]


def batch_loss(decoder: Decoder, items: FrozenSet, picked: Sequence[tuple[int, random.Random]]) -> torch.Tensor:
    """The mean cross-entropy of the gold options of `picked` (item, the draw of its order), in one pass."""
    readings = [(index, rnd.randrange(len(items.items[index].readings))) for index, rnd in picked]
    parts = [items.own(index, number) for index, number in readings]
    labels = [items.items[index].readings[number].labels for index, number in readings]
    losses = []
    for (index, number), logits in zip(readings, decoder.packed_logits(items.head, parts, labels), strict=True):
        item = items.items[index]
        losses.append(-torch.log_softmax(logits, -1)[item.readings[number].position_of(item.gold)])
    return torch.stack(losses).mean()


def learning_rate(peak: float, step: int, steps: int) -> float:
    """A short warm-up, then a cosine decay to zero at the planned last step."""
    warm = min(1.0, (step + 1) / WARMUP_STEPS)
    return peak * warm * 0.5 * (1 + math.cos(math.pi * min(step, steps) / max(steps, 1)))


class Trainer:
    def __init__(self, decoder: Decoder, plan: Plan, work: Path, report: Callable[[str], None]) -> None:
        self.decoder = decoder
        self.plan = plan
        self.work = work
        self.report = report
        self.parameters = [p for m in decoder.adapted() for p in (m.a, m.b) if p is not None]
        self.optimizer = torch.optim.AdamW(self.parameters, lr=plan.learning_rate, weight_decay=0.0)
        self.progress = Progress(steps=plan.steps)

    @property
    def steps(self) -> int:
        return self.progress.steps

    def state(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in self.named_parameters()}

    def named_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        named = []
        for module in self.decoder.adapted():
            assert module.a is not None and module.b is not None
            named += [(f"{module.name}.lora_a", module.a), (f"{module.name}.lora_b", module.b)]
        return named

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, parameter in self.named_parameters():
                parameter.copy_(state[name])

    def save_checkpoint(self) -> None:
        path = self.work / CHECKPOINT
        temporary = path.with_suffix(".tmp")
        torch.save(
            {"state": self.state(), "optimizer": self.optimizer.state_dict(), "progress": self.progress.__dict__},
            temporary,
        )
        os.replace(temporary, path)

    def resume(self) -> None:
        saved: dict[str, Any] = torch.load(self.work / CHECKPOINT, weights_only=True)
        self.load_state(saved["state"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.progress = Progress(**saved["progress"])

    def consider(self, evaluated: Evaluated) -> None:
        """Keep the factors if they score best of the trained ones so far: higher accuracy, or as high with
        a lower loss. The model as it was is no candidate: the adapter written is always a trained one."""
        figures, best = evaluated.figures, self.progress
        if (figures.accuracy, -figures.loss) > (best.best_accuracy, -best.best_loss):
            best.best_accuracy, best.best_loss, best.best_step = figures.accuracy, figures.loss, best.step
            best.best_state = self.state()
            best.best_answers = evaluated.answers
            best.best_unchanged = figures.unchanged_when_reversed

    def best(self) -> Evaluated:
        """Load the best factors back, and return their evaluation."""
        best = self.progress
        self.load_state(best.best_state)
        figures = Figures(best.best_accuracy, best.best_unchanged, best.best_loss, len(best.best_answers))
        return Evaluated(figures, best.best_answers, 0.0)

    def run(self, train: FrozenSet, evals: FrozenSet, eval_seconds: float) -> str:
        """Train until the planned step, the deadline or Ctrl-C; return which stopped it ("steps", "time"
        or "interrupted"). The caller evaluates the last factors and takes `best()`."""
        plan, progress = self.plan, self.progress
        started, last_save = time.monotonic(), time.monotonic()
        stopped_by = "steps"
        bar = ProgressBar(progress.steps, progress.step, self.report)
        try:
            while progress.step < progress.steps:
                if bar.steps_done() == WARMUP_STEPS and plan.deadline is not None:
                    self.fit_to(plan.deadline, bar.step_seconds(), eval_seconds, bar, len(train))
                reserve = 1.2 * eval_seconds
                if plan.deadline is not None and time.monotonic() + reserve + bar.step_seconds() > plan.deadline:
                    stopped_by = "time"
                    break
                every = max(1, progress.steps // (plan.evaluations + 1))
                for group in self.optimizer.param_groups:
                    group["lr"] = learning_rate(plan.learning_rate, progress.step, progress.steps)
                loss = self.accumulate(train)
                torch.nn.utils.clip_grad_norm_(self.parameters, 1.0)
                self.optimizer.step()
                self.optimizer.zero_grad()
                progress.losses.append(loss)
                progress.step += 1
                bar.show(progress.step, progress.losses)
                if plan.evaluations and progress.step % every == 0 and progress.step < progress.steps:
                    evaluated = evaluate(self.decoder, evals)
                    self.consider(evaluated)
                    figures = evaluated.figures
                    bar.note(f"step {progress.step}: accuracy {figures.accuracy:.1%}, loss {figures.loss:.3f}")
                if time.monotonic() - last_save > CHECKPOINT_SECONDS:
                    self.save_checkpoint()
                    last_save = time.monotonic()
        except KeyboardInterrupt:
            stopped_by = "interrupted"
        progress.seconds += time.monotonic() - started
        bar.done()
        return stopped_by

    def accumulate(self, train: FrozenSet) -> float:
        """The gradients of the mean loss of the step's `plan.batch` items, and that loss. The items are
        the next ones of a seeded shuffle, reshuffled every pass (a resumed run draws what it would have
        drawn), packed into one pass (`Decoder.packed_logits`)."""
        plan, step = self.plan, self.progress.step
        picked = []
        for index in range(step * plan.batch, (step + 1) * plan.batch):
            order = list(range(len(train)))
            random.Random(plan.seed * 1_000_003 + index // len(train)).shuffle(order)
            picked.append((order[index % len(train)], random.Random(plan.seed * 7_919 + index)))
        loss = batch_loss(self.decoder, train, picked)
        loss.backward()  # type: ignore[no-untyped-call]
        return float(loss.detach())

    def fit_to(self, deadline: float, step_seconds: float, eval_seconds: float, bar: ProgressBar, items: int) -> None:
        """Plan no more steps than fit before the deadline, with the evaluations still to come, so that
        the learning rate's schedule ends when the time does instead of being cut off midway."""
        progress = self.progress
        left = deadline - time.monotonic() - (self.plan.evaluations + 1.2) * eval_seconds
        fitting = progress.step + max(0, int(left / step_seconds)) if step_seconds > 0 else progress.steps
        if fitting < progress.steps:
            passes = fitting * self.plan.batch / max(items, 1)
            planned = f"planning {fitting} ({passes:.1f} passes)"
            self.report(f"{progress.steps} steps do not fit in the time given: {planned}")
            progress.steps = fitting
            bar.total = fitting


class ProgressBar:
    """Step, loss and time left on one line (redrawn on a terminal, a line every tenth otherwise)."""

    def __init__(self, total: int, first: int, report: Callable[[str], None]) -> None:
        self.total, self.first = total, first
        self.report = report
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.shown_at = -1

    def steps_done(self) -> int:
        return max(0, self.shown_at - self.first)

    def step_seconds(self) -> float:
        done = self.steps_done()
        return (time.monotonic() - self.started) / done if done > 0 else 0.0

    def show(self, step: int, losses: list[float]) -> None:
        self.shown_at = step
        tenth = max(1, self.total // 10)
        if not self.tty and step % tenth and step != self.total:
            return
        recent = losses[-20:]
        left = self.step_seconds() * (self.total - step)
        filled = int(24 * step / max(self.total, 1))
        line = (
            f"[{'#' * filled}{'.' * (24 - filled)}] step {step}/{self.total}  loss {sum(recent) / len(recent):.3f}  "
            f"{self.step_seconds():.1f} s/step  ETA {int(left // 60)}:{int(left % 60):02d}"
        )
        if self.tty:
            sys.stderr.write("\r" + line)
            sys.stderr.flush()
        else:
            self.report(line)

    def note(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\n")
        self.report(text)

    def done(self) -> None:
        if self.tty and self.shown_at > self.first:
            sys.stderr.write("\n")
