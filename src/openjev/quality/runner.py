"""Send labelled items to a System One server and measure the answers (`openjev eval`)."""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import msgspec

from openjev.client.progress import Progress
from openjev.client.systemone import Reply, SystemOneClient
from openjev.contracts.systemone.wire import ChoiceQuestion, Question
from openjev.domain.state import as_text
from openjev.quality.dataset import EvalItem, answer_names, gold_index, load_items
from openjev.quality.examples import ExamplePool
from openjev.quality.metrics import (
    ConfidentShare,
    PairShares,
    Prediction,
    ReliabilityBin,
    accuracy,
    best_threshold,
    brier_score,
    confidence_auc,
    confident_shares,
    expected_calibration_error,
    fit_temperature,
    mean,
    mean_confidence,
    negative_log_likelihood,
    pair_shares,
    percentile,
    ranking_auc,
    reliability,
    tempered,
)

QUESTION_ID = "q"
MAX_ERRORS_SHOWN = 5
EXCERPT_CHARS = 240  # of each item's state kept in the report: enough to recognise it, bounded whatever the state


class EvalOptions(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    key: str | None = None
    model: str = "jev-latest"
    concurrency: int = 2
    reverse: bool = False
    fit_temperature: bool = False
    debias: str | None = None  # sent as `x_debias` when set; the server's default otherwise
    limit: int | None = None  # only the first N items of each file
    examples: bool = False  # send solved examples drawn from the file's other items (quality/examples.py)
    examples_from: tuple[str, ...] = ()  # more files whose items serve as examples
    examples_apart: str | None = None  # a regular expression on item ids: one family never examples itself
    timeout: float = 300.0
    progress: bool | None = None  # None: a bar when stderr is a terminal


class Outcome(msgspec.Struct):
    item: EvalItem
    index: int  # the item's place among its file's items
    examples: int = 0
    prediction: Prediction | None = None
    reversed: Prediction | None = None
    latency: float | None = None
    input_tokens: int | None = None
    calls: int | None = None
    error: str | None = None


class ItemAnswer(msgspec.Struct, omit_defaults=True):
    """One item's answer, for finding which items a figure is made of (`--out`, `--html`).

    `answer` and `reversed_answer` are answer names as the server reports them (an option, `true` or
    `false`, a level's index); `probabilities` by answer name; `error` when the item failed. `excerpt`
    is the start of the state as the model read it, `state_chars` its whole length (more: it was cut).
    """

    index: int
    gold: str | bool | int
    id: str | None = None
    pair: str | None = None
    excerpt: str = ""
    state_chars: int = 0
    answer: str | None = None
    probabilities: dict[str, float] | None = None
    reversed_answer: str | None = None
    error: str | None = None


class ReverseReport(msgspec.Struct):
    items: int
    accuracy: float
    stable: float  # share of items whose chosen option is the same in both orders


class TemperatureReport(msgspec.Struct):
    temperature: float  # multiply the server's OPENJEV_TEMPERATURE by this
    nll_before: float
    nll_after: float
    ece_after: float
    brier_after: float


class YesNoReport(msgspec.Struct):
    """How well P(yes) separates the items whatever the cut, and the best cut on this file."""

    auc: float | None
    best_threshold: float
    best_threshold_accuracy: float


class FileReport(msgspec.Struct):
    file: str
    items: int
    answered: int
    failures: int
    errors: list[str]
    accuracy: float
    mean_confidence: float
    brier: float
    ece: float
    nll: float
    reliability: list[ReliabilityBin]
    confident: list[ConfidentShare]  # acting only on answers at least this probable: how many, how right
    confidence_auc: float | None  # how well the answer's probability ranks right answers above wrong ones
    latency_p50: float
    latency_p90: float
    items_per_second: float
    input_tokens_per_item: float
    calls_per_item: float
    debias: str | None
    examples_per_item: float = 0.0
    reversed: ReverseReport | None = None
    temperature: TemperatureReport | None = None
    yes_no: YesNoReport | None = None  # when every question of the file is a yes/no question
    pairs: PairShares | None = None  # when items name a `pair`: the pairs with every half answered
    unpaired: int = 0  # items naming a pair whose other half is missing or failed (not in `pairs`)
    unsent: int = 0  # items without an outcome because the run was interrupted (not in `items`)
    answers: list[ItemAnswer] = []  # every item with an outcome, in file order


class EvalReport(msgspec.Struct):
    url: str
    model: str
    files: list[FileReport]
    interrupted: bool = False  # Ctrl-C: the files hold what was answered before it
    overall: FileReport | None = None  # every file's items together, when there are several (no `answers`)


class FileRun(NamedTuple):
    """A file being evaluated: its outcomes grow as items finish."""

    name: str
    items: int
    outcomes: list[Outcome]
    started: float
    yes_no: bool


class Collected:
    """Each file's outcomes as they arrive, so that an interrupted run still reports what was answered."""

    def __init__(self) -> None:
        self.files: list[FileRun] = []

    def partial(self, options: EvalOptions) -> EvalReport:
        """The report of what finished, each file's unanswered items counted as unsent."""
        files = []
        for name, items, outcomes, started, yes_no in self.files:
            report = summarize(name, outcomes, time.perf_counter() - started, options, yes_no=yes_no)
            report.unsent = items - len(outcomes)
            files.append(report)
        return EvalReport(
            url=options.url, model=options.model, files=files, interrupted=True, overall=self.overall(options)
        )

    def overall(self, options: EvalOptions) -> FileReport | None:
        """Every file's outcomes as one set: the figure a run over a whole dev set is read for."""
        if len(self.files) < 2:
            return None
        report = summarize(
            f"all {len(self.files)} files",
            [o for run in self.files for o in run.outcomes],
            time.perf_counter() - self.files[0].started,
            options,
            yes_no=all(run.yes_no for run in self.files),
            answers=False,  # each file's report lists its own
        )
        report.unsent = sum(run.items - len(run.outcomes) for run in self.files)
        return report


def request_for(item: EvalItem, question: Question, options: EvalOptions) -> dict[str, Any]:
    body: dict[str, Any] = {"model": options.model, "state": item.state, "questions": {QUESTION_ID: question}}
    if options.debias is not None:
        body["x_debias"] = options.debias
    return msgspec.to_builtins(body)  # type: ignore[no-any-return]


def reversed_question(question: ChoiceQuestion) -> ChoiceQuestion:
    return msgspec.structs.replace(question, criteria=dict(reversed(list(question.criteria.items()))))


def prediction_from(answer: Any, names: Sequence[str], gold: int) -> Prediction:
    """The answer's distribution in `names` order (yes first for noul)."""
    if answer["type"] == "noul":
        yes = float(answer["noul"])
        return Prediction(probabilities=(yes, 1.0 - yes), gold=gold)
    probabilities = answer["probabilities"]
    return Prediction(probabilities=tuple(float(probabilities[n]) for n in names), gold=gold)


async def evaluate_item(
    client: SystemOneClient, item: EvalItem, options: EvalOptions, question: Question | None, index: int
) -> Outcome:
    """`question`: the item's question as sent (with examples), when it is not the item's own."""
    names = answer_names(item.question)
    gold = gold_index(item)
    question = item.question if question is None else question
    try:
        reply = await client.decide(request_for(item, question, options))
        if not reply.ok:
            return Outcome(item=item, index=index, error=reply.error(), latency=reply.latency)
        outcome = Outcome(
            item=item,
            index=index,
            examples=len(question.x_examples or ()),
            prediction=prediction_from(reply.body["answers"][QUESTION_ID], names, gold),
            latency=reply.latency,
            input_tokens=reply.body["usage"]["input_tokens"],
            calls=reply.body["usage"]["output_tokens"],
        )
        if options.reverse and isinstance(question, ChoiceQuestion):
            back: Reply = await client.decide(request_for(item, reversed_question(question), options))
            if not back.ok:
                return Outcome(item=item, index=index, error=f"reversed: {back.error()}", latency=reply.latency)
            outcome.reversed = prediction_from(back.body["answers"][QUESTION_ID], names, gold)
        return outcome
    except (aiohttp.ClientError, TimeoutError, KeyError, TypeError, ValueError) as exc:
        return Outcome(item=item, index=index, error=f"{type(exc).__name__}: {exc}")


def item_answer(outcome: Outcome) -> ItemAnswer:
    item = outcome.item
    names = answer_names(item.question)
    state = as_text(item.state)
    answer = ItemAnswer(
        index=outcome.index,
        gold=item.gold,
        id=item.id,
        pair=item.pair,
        excerpt=state[:EXCERPT_CHARS],
        state_chars=len(state),
        error=outcome.error,
    )
    if outcome.prediction is not None:
        answer.answer = names[outcome.prediction.top]
        answer.probabilities = dict(zip(names, outcome.prediction.probabilities, strict=True))
    if outcome.reversed is not None:
        answer.reversed_answer = names[outcome.reversed.top]
    return answer


async def evaluate_file(path: Path, options: EvalOptions, collected: Collected | None = None) -> FileReport:
    every = load_items(path)
    items = every[: options.limit]
    pool = None
    if options.examples:
        extra = [item for path in options.examples_from for item in load_items(Path(path))]
        apart = re.compile(options.examples_apart) if options.examples_apart is not None else None
        pool = ExamplePool([*every, *extra], apart)
    progress = Progress(len(items), path.name, enabled=options.progress)
    gate = asyncio.Semaphore(options.concurrency)
    yes_no = bool(items) and all(item.question.kind == "yes_no" for item in items)
    finished: list[Outcome] = []
    started = time.perf_counter()
    if collected is not None:
        collected.files.append(FileRun(str(path), len(items), finished, started, yes_no))
    try:
        async with SystemOneClient(options.url, key=options.key, timeout=options.timeout) as client:

            async def one(index: int, item: EvalItem) -> Outcome:
                question = pool.question_for(item) if pool is not None else None
                async with gate:
                    outcome = await evaluate_item(client, item, options, question, index)
                finished.append(outcome)
                progress.advance(failed=outcome.error is not None)
                return outcome

            outcomes = await asyncio.gather(*(one(index, item) for index, item in enumerate(items)))
            elapsed = time.perf_counter() - started
    finally:
        progress.close()
    return summarize(str(path), outcomes, elapsed, options, yes_no=yes_no)


def summarize(
    name: str,
    outcomes: Sequence[Outcome],
    elapsed: float,
    options: EvalOptions,
    *,
    yes_no: bool = False,
    answers: bool = True,  # list every item's answer in the report
) -> FileReport:
    predictions = [o.prediction for o in outcomes if o.prediction is not None]
    answered = [o for o in outcomes if o.prediction is not None]
    latencies = [o.latency for o in answered if o.latency is not None]
    errors = list(dict.fromkeys(o.error for o in outcomes if o.error is not None))[:MAX_ERRORS_SHOWN]
    report = FileReport(
        file=name,
        items=len(outcomes),
        answered=len(predictions),
        failures=len(outcomes) - len(predictions),
        errors=errors,
        accuracy=accuracy(predictions),
        mean_confidence=mean_confidence(predictions),
        brier=brier_score(predictions),
        ece=expected_calibration_error(predictions),
        nll=negative_log_likelihood(predictions),
        reliability=reliability(predictions),
        confident=confident_shares(predictions),
        confidence_auc=confidence_auc(predictions),
        latency_p50=percentile(latencies, 50),
        latency_p90=percentile(latencies, 90),
        items_per_second=len(predictions) / elapsed if elapsed > 0 else math.nan,
        input_tokens_per_item=mean([o.input_tokens for o in answered if o.input_tokens is not None]),
        calls_per_item=mean([o.calls for o in answered if o.calls is not None]),
        debias=options.debias,
        examples_per_item=mean([float(o.examples) for o in answered]),
        answers=sorted(map(item_answer, outcomes), key=lambda a: a.index) if answers else [],
    )
    pairs = [(o.prediction, o.reversed) for o in answered if o.prediction is not None and o.reversed is not None]
    if pairs:
        report.reversed = ReverseReport(
            items=len(pairs),
            accuracy=accuracy([r for _, r in pairs]),
            stable=mean([1.0 if f.top == r.top else 0.0 for f, r in pairs]),
        )
    _count_pairs(report, outcomes)
    if yes_no and predictions:
        p_yes = [p.probabilities[0] for p in predictions]  # yes is first (prediction_from)
        is_yes = [p.gold == 0 for p in predictions]
        cut = best_threshold(p_yes, is_yes)
        report.yes_no = YesNoReport(
            auc=ranking_auc(p_yes, is_yes), best_threshold=cut.threshold, best_threshold_accuracy=cut.accuracy
        )
    if options.fit_temperature and predictions:
        t = fit_temperature(predictions)
        after = [tempered(p, t) for p in predictions]
        report.temperature = TemperatureReport(
            temperature=t,
            nll_before=report.nll,
            nll_after=negative_log_likelihood(after),
            ece_after=expected_calibration_error(after),
            brier_after=brier_score(after),
        )
    return report


def _count_pairs(report: FileReport, outcomes: Sequence[Outcome]) -> None:
    """A pair id names one pair across the files of a run; a pair counts once all its items are answered."""
    members = Counter(o.item.pair for o in outcomes if o.item.pair is not None)
    right: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        if o.item.pair is not None and o.prediction is not None:
            right[o.item.pair].append(o.prediction.correct)
    complete = [r for pair, r in right.items() if len(r) == members[pair] >= 2]
    if members:
        report.pairs = pair_shares(complete)
        report.unpaired = sum(members.values()) - sum(map(len, complete))


async def run_eval(paths: Sequence[Path], options: EvalOptions, collected: Collected | None = None) -> EvalReport:
    collected = Collected() if collected is None else collected
    files = [await evaluate_file(path, options, collected) for path in paths]
    return EvalReport(url=options.url, model=options.model, files=files, overall=collected.overall(options))


def format_report(report: EvalReport) -> str:
    lines: list[str] = ["interrupted: the figures cover the items answered before Ctrl-C"] if report.interrupted else []
    for f in [*report.files, *([report.overall] if report.overall is not None else [])]:
        lines += _file_lines(f)
    return "\n".join(lines)


def _file_lines(f: FileReport) -> list[str]:
    lines = [
        f"{f.file}: {f.answered}/{f.items} answered"
        + (f", {f.failures} failed" if f.failures else "")
        + (f", {f.unsent} not sent (interrupted)" if f.unsent else ""),
        f"  accuracy {_pct(f.accuracy)}   mean confidence {_pct(f.mean_confidence)}   "
        f"Brier {f.brier:.3f}   ECE {f.ece:.3f}   NLL {f.nll:.3f}",
        f"  latency p50 {f.latency_p50:.2f} s, p90 {f.latency_p90:.2f} s   {f.items_per_second:.2f} items/s   "
        f"{f.calls_per_item:.1f} calls and {f.input_tokens_per_item:.0f} input tokens per item"
        + (f"   debias {f.debias}" if f.debias else "")
        + (f"   {f.examples_per_item:.1f} worked examples per item" if f.examples_per_item else ""),
    ]
    if f.reversed is not None:
        lines.append(
            f"  options reversed: accuracy {_pct(f.reversed.accuracy)}, "
            f"{_pct(f.reversed.stable)} of {f.reversed.items} answers unchanged"
        )
    if f.pairs is not None:
        lines.append(
            f"  contrastive pairs: {_pct(f.pairs.all_right)} of {f.pairs.pairs} with every half right, "
            f"{_pct(f.pairs.none_right).strip()} with none"
            + (f" ({f.unpaired} items left out: the rest of their pair failed or is missing)" if f.unpaired else "")
        )
    if f.temperature is not None:
        t = f.temperature
        lines.append(
            f"  fitted temperature x{t.temperature:.3f}: NLL {t.nll_before:.3f} -> {t.nll_after:.3f}, "
            f"ECE {f.ece:.3f} -> {t.ece_after:.3f}, Brier {f.brier:.3f} -> {t.brier_after:.3f} "
            "(multiply OPENJEV_TEMPERATURE by this factor)"
        )
    if f.yes_no is not None:
        y = f.yes_no
        auc = "n/a (one answer only)" if y.auc is None else f"{y.auc:.3f}"
        lines.append(
            f"  yes/no: AUC {auc} (0.5 = no signal); answering yes when P(yes) >= {y.best_threshold:.3f} "
            f"would score {_pct(y.best_threshold_accuracy).strip()} here (fitted on these items, so optimistic)"
        )
    lines.append(
        "  acting only on answers at least this probable (share of items, accuracy): "
        + "; ".join(f"{c.threshold:.1f}: {_pct(c.coverage).strip()}, {_pct(c.accuracy).strip()}" for c in f.confident)
    )
    if f.confidence_auc is not None:
        lines.append(f"  the answer's probability ranks right answers above wrong ones with AUC {f.confidence_auc:.3f}")
    lines.append("  reliability (confidence bin: items, mean confidence, accuracy):")
    for b in f.reliability:
        if b.count:
            lines.append(f"    {b.low:.1f}-{b.high:.1f}: {b.count:4d}  {_pct(b.mean_confidence)}  {_pct(b.accuracy)}")
    lines += [f"  error: {e}" for e in f.errors]
    return lines


def _pct(x: float | None) -> str:
    return "   n/a" if x is None or math.isnan(x) else f"{100 * x:5.1f}%"
