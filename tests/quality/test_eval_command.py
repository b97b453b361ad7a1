"""`openjev eval` end to end: the real CLI against a real `openjev serve --backend fake` process."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.smoke.servers import OPENJEV, clean_env, openjev_server, wait_ready

TOPICS = {"World": "World news", "Sports": "Sports news", "Business": "Business news", "Tech": None}
ITEMS: list[dict[str, Any]] = [
    *(
        {
            "id": f"c{i}",
            "state": f"Headline number {i}",
            "question": {"type": "choice", "instructions": "Topic?", "criteria": TOPICS},
            "gold": list(TOPICS)[i % 4],
        }
        for i in range(8)
    ),
    *(
        {
            "id": f"n{i}",
            "state": f"Review {i}",
            "question": {"type": "noul", "instructions": "Positive?"},
            "gold": i % 2 == 0,
        }
        for i in range(6)
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with openjev_server("--backend", "fake") as url:
        wait_ready(url)
        yield url


def write_items(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def run_eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPENJEV), "eval", *args], env=clean_env({}), capture_output=True, text=True, timeout=120)


def ask(url: str, item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = json.dumps({"model": "jev-latest", "state": item["state"], "questions": {"q": item["question"]}, **extra})
    request = urllib.request.Request(
        url + "/v1/systemone", data=body.encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        result: dict[str, Any] = json.loads(reply.read())
    return result


def is_right(answer: dict[str, Any], gold: Any) -> bool:
    if answer["type"] == "noul":
        return (answer["noul"] > 0.5) == gold if answer["noul"] != 0.5 else gold is True
    return bool(answer["choice"] == gold)


def test_the_report_matches_the_answers_the_server_gives(server: str, tmp_path: Path) -> None:
    data = write_items(tmp_path / "set.jsonl", ITEMS)
    out = tmp_path / "report.json"
    done = run_eval(str(data), "--url", server, "--reverse", "--fit-temperature", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())["files"][0]
    assert (report["items"], report["answered"], report["failures"]) == (14, 14, 0)
    answers = [ask(server, item)["answers"]["q"] for item in ITEMS]
    right = [is_right(a, item["gold"]) for a, item in zip(answers, ITEMS, strict=True)]
    assert report["accuracy"] == pytest.approx(sum(right) / len(right))
    confidences = [
        max(a["noul"], 1 - a["noul"]) if a["type"] == "noul" else max(a["probabilities"].values()) for a in answers
    ]
    assert report["mean_confidence"] == pytest.approx(sum(confidences) / len(confidences))
    assert sum(b["count"] for b in report["reliability"]) == 14 and len(report["reliability"]) == 10
    confident = [(c, r) for c, r in zip(confidences, right, strict=True) if c >= 0.6]
    share = next(s for s in report["confident"] if s["threshold"] == 0.6)
    assert share["coverage"] == pytest.approx(len(confident) / 14)
    assert share["accuracy"] == (pytest.approx(sum(r for _, r in confident) / len(confident)) if confident else None)
    assert report["calls_per_item"] == 2.0  # the fake server does not debias: warm-up plus one branch
    assert report["latency_p50"] > 0 and report["items_per_second"] > 0
    reversed_ = report["reversed"]
    assert reversed_["items"] == 8  # only the choice items can be reversed
    flipped = []
    for item, answer in zip(ITEMS[:8], answers[:8], strict=True):
        back = {**item["question"], "criteria": dict(reversed(list(TOPICS.items())))}
        flipped.append(ask(server, {**item, "question": back})["answers"]["q"]["choice"] == answer["choice"])
    assert reversed_["stable"] == pytest.approx(sum(flipped) / 8)
    by_item = report["answers"]
    assert [(a["index"], a["id"], a["gold"]) for a in by_item] == [(i, t["id"], t["gold"]) for i, t in enumerate(ITEMS)]
    for got, answer, same in zip(by_item[:8], answers[:8], flipped, strict=True):
        assert got["answer"] == answer["choice"] and got["probabilities"] == pytest.approx(answer["probabilities"])
        assert (got["reversed_answer"] == got["answer"]) == same
    for got, answer in zip(by_item[8:], answers[8:], strict=True):
        assert got["probabilities"] == pytest.approx({"true": answer["noul"], "false": 1 - answer["noul"]})
        assert got["answer"] == ("true" if answer["noul"] >= 0.5 else "false") and "reversed_answer" not in got
    fit = report["temperature"]
    assert fit["temperature"] > 0 and fit["nll_after"] <= fit["nll_before"] + 1e-12
    assert "accuracy" in done.stdout and "reliability" in done.stdout and "fitted temperature" in done.stdout
    assert "acting only on answers at least this probable" in done.stdout
    assert report["yes_no"] is None  # a file with choice questions has no yes/no ranking
    assert json.loads(out.read_text())["overall"] is None  # one file: it is the whole run


def test_several_files_are_also_reported_as_one_set(server: str, tmp_path: Path) -> None:
    first, second = write_items(tmp_path / "a.jsonl", ITEMS[:8]), write_items(tmp_path / "b.jsonl", ITEMS[8:])
    out = tmp_path / "report.json"
    done = run_eval(str(first), str(second), "--url", server, "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    files, overall = report["files"], report["overall"]
    assert (overall["file"], overall["items"], overall["answered"], overall["answers"]) == ("all 2 files", 14, 14, [])
    assert overall["accuracy"] == pytest.approx(sum(f["accuracy"] * f["items"] for f in files) / 14)
    confidences = [max(a["probabilities"].values()) for f in files for a in f["answers"]]
    assert overall["mean_confidence"] == pytest.approx(sum(confidences) / 14)
    assert overall["yes_no"] is None  # one of the files asks choice questions
    assert "all 2 files: 14/14 answered" in done.stdout


def test_a_yes_no_file_reports_ranking_and_best_cut_from_the_servers_answers(server: str, tmp_path: Path) -> None:
    items = [
        {"state": f"Review {i}", "question": {"type": "noul", "instructions": "Positive?"}, "gold": i % 3 != 0}
        for i in range(12)
    ]
    out = tmp_path / "report.json"
    done = run_eval(str(write_items(tmp_path / "yn.jsonl", items)), "--url", server, "--out", str(out))
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())["files"][0]["yes_no"]
    p_yes = [ask(server, item)["answers"]["q"]["noul"] for item in items]
    gold = [item["gold"] for item in items]
    pairs = [(p, n) for p, g in zip(p_yes, gold, strict=True) if g for n, h in zip(p_yes, gold, strict=True) if not h]
    assert got["auc"] == pytest.approx(sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs))
    cut = got["best_threshold"]
    at_cut = sum((p >= cut) == g for p, g in zip(p_yes, gold, strict=True)) / len(items)
    assert got["best_threshold_accuracy"] == pytest.approx(at_cut)
    every_cut = [0.0, 1.01, *p_yes]
    assert at_cut >= max(sum((p >= c) == g for p, g in zip(p_yes, gold, strict=True)) / len(items) for c in every_cut)
    assert "yes/no: AUC" in done.stdout


def test_the_debias_flag_reaches_the_server(server: str, tmp_path: Path) -> None:
    data = write_items(tmp_path / "set.jsonl", ITEMS[:4])
    out = tmp_path / "report.json"
    done = run_eval(str(data), "--url", server, "--debias", "rotate", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())["files"][0]
    assert report["calls_per_item"] == 1 + 8  # warm-up, then the four options in eight orders
    assert report["debias"] == "rotate"


def test_failures_are_counted_and_make_the_exit_code_1(server: str, tmp_path: Path) -> None:
    bad = {**ITEMS[0], "question": {"type": "choice", "criteria": {f"o{i}": None for i in range(70)}}, "gold": "o1"}
    data = write_items(tmp_path / "set.jsonl", [ITEMS[0], bad])
    out = tmp_path / "report.json"
    done = run_eval(str(data), "--url", server, "--out", str(out))
    assert done.returncode == 1
    assert "1 failed" in done.stdout and "HTTP 422" in done.stdout
    ok, failed = json.loads(out.read_text())["files"][0]["answers"]
    assert "error" not in ok and ok["answer"] in TOPICS
    assert failed["index"] == 1 and "HTTP 422" in failed["error"] and "answer" not in failed


def test_contrastive_pairs_count_only_when_every_half_is_answered(server: str, tmp_path: Path) -> None:
    paired = [{**item, "pair": f"p{i // 2}"} for i, item in enumerate(ITEMS[:6])]  # p0, p1, p2
    bad = {**paired[5], "question": {"type": "choice", "criteria": {f"o{i}": None for i in range(70)}}, "gold": "o1"}
    lone = {**ITEMS[6], "pair": "p3"}
    items = [*paired[:5], bad, lone, ITEMS[7]]  # p2's second half fails (422); p3 has one half; one item unpaired
    out = tmp_path / "report.json"
    done = run_eval(str(write_items(tmp_path / "set.jsonl", items)), "--url", server, "--out", str(out))
    assert done.returncode == 1, done.stderr  # the failed item
    report = json.loads(out.read_text())["files"][0]
    right = [is_right(ask(server, item)["answers"]["q"], item["gold"]) for item in paired[:4]]
    both = [right[0] and right[1], right[2] and right[3]]
    none = [not (right[0] or right[1]), not (right[2] or right[3])]
    assert report["pairs"] == {"pairs": 2, "all_right": sum(both) / 2, "none_right": sum(none) / 2}
    assert report["unpaired"] == 3  # p2's answered half, its failed half, and p3
    assert [a.get("pair") for a in report["answers"]] == ["p0", "p0", "p1", "p1", "p2", "p2", "p3", None]
    assert "contrastive pairs:" in done.stdout and "3 items left out" in done.stdout
    plain = tmp_path / "plain.json"
    unpaired = write_items(tmp_path / "plain.jsonl", ITEMS[:4])
    assert run_eval(str(unpaired), "--url", server, "--out", str(plain)).returncode == 0
    assert json.loads(plain.read_text())["files"][0]["pairs"] is None


def test_examples_apart_keeps_a_family_out_of_its_own_examples(server: str, tmp_path: Path) -> None:
    # Two items per topic; the two of a topic are one family (t0 … t3), as the variants of one case are.
    items = [{**item, "id": f"t{i % 4}-v{i}"} for i, item in enumerate(ITEMS[:8])]
    data = write_items(tmp_path / "set.jsonl", items)
    counts: list[float] = []
    for apart in ([], ["--examples-apart", "^(t[0-9])-"], ["--examples-apart", "^t"], ["--examples-apart", "x"]):
        out = tmp_path / f"report{len(counts)}.json"
        done = run_eval(str(data), "--url", server, "--examples", *apart, "--out", str(out))
        assert done.returncode == 0, done.stderr
        counts.append(json.loads(out.read_text())["files"][0]["examples_per_item"])
    # Every topic from the other items; all but its own (its twin is family); none (one family); no match.
    assert counts == [4.0, 3.0, 0.0, 4.0]
    refused = run_eval(str(data), "--url", "http://127.0.0.1:9", "--examples-apart", "(")
    assert refused.returncode == 2 and "not a regular expression" in refused.stderr


def test_a_bad_file_names_its_line(tmp_path: Path) -> None:
    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps(ITEMS[0]) + "\n" + json.dumps({**ITEMS[1], "gold": "Weather"}) + "\n")
    done = run_eval(str(data), "--url", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert "line 2" in done.stderr and "Weather" in done.stderr


def test_the_report_never_replaces_a_file_unless_forced_and_never_an_input(server: str, tmp_path: Path) -> None:
    data = write_items(tmp_path / "set.jsonl", ITEMS[:2])
    dataset = data.read_bytes()
    existing = tmp_path / "report.json"
    existing.write_text("keep me")
    refused = run_eval(str(data), "--url", server, "--out", str(existing))
    assert refused.returncode == 2 and "already exists: pass --force" in refused.stderr
    assert existing.read_text() == "keep me"
    forced = run_eval(str(data), "--url", server, "--out", str(existing), "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(existing.read_text())["files"]
    over_input = run_eval(str(data), "--url", server, "--out", str(data), "--force")
    assert over_input.returncode == 2 and "one of the labelled files" in over_input.stderr
    assert data.read_bytes() == dataset
    for out, message in ((tmp_path, "is a directory"), (tmp_path / "nowhere" / "r.json", "does not exist")):
        done = run_eval(str(data), "--url", server, "--out", str(out))
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_the_html_page_shows_each_files_plots_and_wrong_answers(server: str, tmp_path: Path) -> None:
    long = {**ITEMS[8], "id": "long", "state": "A long review. " * 40}  # 600 characters: kept cut at 240
    sets = (ITEMS[:8], [*ITEMS[8:], long])
    topics, reviews = write_items(tmp_path / "t.jsonl", sets[0]), write_items(tmp_path / "r.jsonl", sets[1])
    out, page = tmp_path / "report.json", tmp_path / "report.html"
    done = run_eval(str(topics), str(reviews), "--url", server, "--reverse", "--out", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    report, html = json.loads(out.read_text()), page.read_text()
    found = re.findall(r'<section id="[^"]*" data-file="([^"]*)">(.*?)</section>', html, re.DOTALL)
    assert [name for name, _ in found] == [str(topics), str(reviews), "all 2 files"]
    base = ["reliability", "confusion", "coverage"]
    assert [re.findall(r'data-plot="([a-z]+)"', body) for _, body in found] == [base, [*base, "roc"], base]
    stable = report["files"][0]["reversed"]["stable"]
    assert f"stability (options reversed)</th><td>{100 * stable:.1f} % <span" in found[0][1]
    for (_, body), got, items in zip(found, report["files"], sets, strict=False):
        kept = [(a["excerpt"], a["state_chars"]) for a in got["answers"]]
        assert kept == [(item["state"][:240], len(item["state"])) for item in items]
        answers = {a["index"]: a for a in got["answers"]}
        wrong = [a["index"] for a in got["answers"] if a["answer"] != json.dumps(a["gold"]).strip('"')]
        shown = [int(i) for i in re.findall(r'<tr data-index="(\d+)">', body)]
        assert shown and sorted(shown) == wrong  # every wrong answer, and no other
        confidence = [answers[i]["probabilities"][answers[i]["answer"]] for i in shown]
        assert confidence == sorted(confidence, reverse=True)  # the most confident first
    assert "<script" not in html and 'http-equiv="Content-Security-Policy"' in html


def test_the_html_page_follows_the_reports_rules(server: str, tmp_path: Path) -> None:
    data = write_items(tmp_path / "set.jsonl", ITEMS[:2])
    existing = tmp_path / "report.html"
    existing.write_text("keep me")
    refused = run_eval(str(data), "--url", server, "--html", str(existing))
    assert refused.returncode == 2 and "--html" in refused.stderr and "already exists: pass --force" in refused.stderr
    assert existing.read_text() == "keep me"
    forced = run_eval(str(data), "--url", server, "--html", str(existing), "--force")
    assert forced.returncode == 0, forced.stderr
    assert existing.read_text().startswith("<!DOCTYPE html>")
    same = run_eval(str(data), "--url", server, "--out", str(tmp_path / "r"), "--html", str(tmp_path / "r"))
    assert same.returncode == 2 and "both name" in same.stderr and not (tmp_path / "r").exists()
    cases = (
        (data, "one of the labelled files"),
        (tmp_path, "is a directory"),
        (tmp_path / "nowhere" / "r.html", "does not exist"),
    )
    for page, message in cases:
        done = run_eval(str(data), "--url", server, "--html", str(page), "--force")
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert data.read_text().startswith("{")
