"""The HTML page `openjev eval --html` writes, from a report built by hand: its sections, figures,
plots and wrong answers, escaping, and that it needs nothing outside itself."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import msgspec
import pytest

from openjev.quality.figures import gold_name
from openjev.quality.html_report import WRONG_SHOWN, render_html
from openjev.quality.metrics import reliability
from openjev.quality.runner import EvalReport, FileReport, ItemAnswer, ReverseReport, YesNoReport

HOSTILE = '<img src=x onerror="alert(1)"> & </td>'
VOID = {"meta", "br", "img", "input", "link", "hr", "circle", "rect", "line", "polyline"}


class Tags(HTMLParser):
    """Every element's tag and attributes, in document order, and whether every tag closed."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID:
            assert self.open.pop() == tag, f"</{tag}> closes another element"


def parsed(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    assert tags.open == []
    return tags


def with_attribute(tags: Tags, name: str) -> list[str | None]:
    return [attrs[name] for _, attrs in tags.elements if name in attrs]


def file_report(name: str, answers: list[ItemAnswer], **extra: object) -> FileReport:
    answered = [a for a in answers if a.answer is not None]
    right = [a for a in answered if a.answer == gold_name(a.gold)]
    fields: dict[str, object] = dict(
        file=name,
        items=len(answers),
        answered=len(answered),
        failures=len(answers) - len(answered),
        errors=[],
        accuracy=len(right) / len(answered) if answered else math.nan,
        mean_confidence=0.7,
        brier=0.4,
        ece=0.1,
        nll=0.6,
        reliability=reliability([]),
        confident=[],
        confidence_auc=0.6,
        latency_p50=0.1,
        latency_p90=0.2,
        items_per_second=9.0,
        input_tokens_per_item=50.0,
        calls_per_item=2.0,
        debias=None,
        answers=answers,
    )
    return msgspec.convert({**fields, **extra}, FileReport, from_attributes=True)


def yes_no(index: int, gold: bool, p_yes: float, state: str = "a review") -> ItemAnswer:
    return ItemAnswer(
        index=index,
        gold=gold,
        id=f"r{index}",
        answer="true" if p_yes >= 0.5 else "false",
        probabilities={"true": p_yes, "false": 1 - p_yes},
        excerpt=state[:240],
        state_chars=len(state),
    )


def topic(index: int, gold: str, given: str) -> ItemAnswer:
    probabilities = {name: 0.7 if name == given else 0.15 for name in ("World", "Sports", "Tech")}
    return ItemAnswer(index=index, gold=gold, answer=given, probabilities=probabilities, excerpt="news", state_chars=4)


REVIEWS = [
    yes_no(0, True, 0.9),
    yes_no(1, False, 0.8, state="x" * 1000),  # wrong, confident: its state was cut at 240 characters
    yes_no(2, True, 0.3, state=HOSTILE),  # wrong
    ItemAnswer(index=3, gold=False, id="r3", error="HTTP 422", excerpt="failed", state_chars=6),
]
TOPICS = [topic(0, "World", "World"), topic(1, "Sports", "World"), topic(2, "Tech", "Tech")]


def report(**extra: object) -> EvalReport:
    reviews = file_report(
        "reviews.jsonl",
        REVIEWS,
        yes_no=YesNoReport(auc=0.75, best_threshold=0.5, best_threshold_accuracy=0.75),
    )
    topics = file_report("topics <&>.jsonl", TOPICS, reversed=ReverseReport(items=3, accuracy=2 / 3, stable=1.0))
    overall = file_report("all 2 files", [], answered=6, accuracy=0.5)
    return EvalReport(url="http://127.0.0.1:9", model="jev-latest", files=[reviews, topics], overall=overall, **extra)  # type: ignore[arg-type]


def sections(page: str) -> dict[str, str]:
    """Each section's markup by its `data-file`."""
    found = re.findall(r'<section id="[^"]*" data-file="([^"]*)">(.*?)</section>', page, re.DOTALL)
    return {name: body for name, body in found}


def test_each_file_and_the_whole_run_get_their_figures_and_plots() -> None:
    page = render_html(report())
    parsed(page)
    parts = sections(page)
    assert list(parts) == ["reviews.jsonl", "topics &lt;&amp;&gt;.jsonl", "all 2 files"]
    plots = {name: re.findall(r'data-plot="([a-z]+)"', body) for name, body in parts.items()}
    assert plots["reviews.jsonl"] == ["reliability", "confusion", "coverage", "roc"]  # yes/no: the ROC too
    assert plots["topics &lt;&amp;&gt;.jsonl"] == ["reliability", "confusion", "coverage"]
    assert plots["all 2 files"] == ["reliability", "confusion", "coverage"]
    assert "stability (options reversed)" in parts["topics &lt;&amp;&gt;.jsonl"]
    assert "stability" not in parts["reviews.jsonl"]  # yes/no questions are not reversed


def test_accuracy_and_stability_carry_their_wilson_intervals() -> None:
    parts = sections(render_html(report()))

    def intervals(body: str) -> list[tuple[float, float]]:
        found = re.findall(r'<span class="interval" data-low="([^"]+)" data-high="([^"]+)">', body)
        return [(float(low), float(high)) for low, high in found]

    [accuracy] = intervals(parts["reviews.jsonl"])  # 1 of the 3 answered right
    assert accuracy == pytest.approx((0.0615, 0.7923), abs=1e-4)
    assert "33.3 % <span" in parts["reviews.jsonl"] and "n = 3)" in parts["reviews.jsonl"]
    accuracy, stable, reversed_accuracy = intervals(parts["topics &lt;&amp;&gt;.jsonl"])
    assert accuracy == reversed_accuracy == pytest.approx((0.2077, 0.9385), abs=1e-4)  # 2 of 3
    assert stable[0] == pytest.approx(0.4385, abs=1e-4) and stable[1] == 1.0  # 3 of 3: still an interval


def test_wrong_answers_come_most_confident_first_escaped_with_the_cut_marked() -> None:
    page = render_html(report())
    table = re.search(r'<table class="wrong-answers".*?</table>', sections(page)["reviews.jsonl"], re.DOTALL)
    assert table is not None
    rows = re.findall(
        r'<tr data-index="(\d+)"><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td[^>]*>([^<]*)</td>', table.group(0)
    )
    assert [row[:4] for row in rows] == [("1", "r1", "false", "true"), ("2", "r2", "true", "false")]
    assert [row[4] for row in rows] == ["0.800", "0.700"]
    assert '<span class="cut" data-truncated="760">… [760 more characters]</span>' in table.group(0)
    assert "x" * 240 + "<span" in table.group(0)
    assert HOSTILE not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;/td&gt;" in table.group(0)
    assert "data-truncated" not in table.group(0).split('data-index="2"')[1]  # a whole state is not marked


def test_a_long_list_of_wrong_answers_is_cut_and_says_where_the_rest_is() -> None:
    many = [yes_no(i, True, 0.2) for i in range(WRONG_SHOWN + 7)]
    page = render_html(EvalReport(url="u", model="m", files=[file_report("many.jsonl", many)]))
    assert page.count("<tr data-index=") == WRONG_SHOWN
    assert f"Wrong answers, the most confident first ({WRONG_SHOWN + 7})" in page
    assert "7 more wrong answers are not shown" in page


def test_the_page_needs_nothing_outside_itself() -> None:
    page = render_html(report())
    tags = parsed(page)
    assert not any(tag in {"script", "link", "img", "iframe", "object", "embed"} for tag, _ in tags.elements)
    assert [src for src in with_attribute(tags, "src")] == []
    assert all((href or "").startswith("#") for href in with_attribute(tags, "href"))
    assert "url(" not in page and "@import" not in page and "@font-face" not in page
    [policy] = [attrs for tag, attrs in tags.elements if attrs.get("http-equiv") == "Content-Security-Policy"]
    assert policy["content"] == "default-src 'none'; style-src 'unsafe-inline'"


def test_an_interrupted_run_says_so_at_the_top() -> None:
    assert 'data-interrupted="true"' in render_html(report(interrupted=True))
    assert "data-interrupted" not in render_html(report())


def test_a_file_whose_every_item_failed_still_gets_its_section() -> None:
    failed = [ItemAnswer(index=0, gold=True, error="HTTP 503")]
    page = render_html(EvalReport(url="u", model="m", files=[file_report("down.jsonl", failed, errors=["HTTP 503"])]))
    parsed(page)
    body = sections(page)["down.jsonl"]
    assert "0 of 1 answered, 1 failed" in body and '<th scope="row">accuracy</th><td>n/a</td>' in body
    assert re.findall(r'data-plot="([a-z]+)"', body) == ["reliability", "confusion", "coverage"]
    assert body.count('class="no-data"') == 3 and "HTTP 503" in body
