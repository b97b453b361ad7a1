"""The real `openjev serve` process over plain HTTP: headers, bodies, keys and settings, answer independence."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from backports import zstd

from tests.blackbox.conftest import (
    API_KEY,
    REQUEST_ID,
    SPEC_QUESTIONS,
    SPEC_STATE,
    ServerProcess,
    error_type,
    http_request,
    noul_questions,
    post_json,
    spec_request,
)

TIMING_ENTRY = re.compile(r'^\s*([A-Za-z0-9_-]+);dur=([0-9.]+)(?:;desc="[^"]*")?\s*$')


def body_of(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def json_headers(**extra: str) -> dict[str, str]:
    return {"Content-Type": "application/json", **extra}


# --------------------------------------------------------------------------------------------
# Headers and usage


ROUTES: list[tuple[str, str, bytes | None, int]] = [
    ("GET", "/health", None, 200),
    ("GET", "/health/live", None, 200),
    ("GET", "/v1/models", None, 200),
    ("GET", "/v1/limits", None, 200),
    ("GET", "/openapi.json", None, 200),
    ("POST", "/v1/systemone", body_of(spec_request()), 200),
    ("POST", "/v1/systemone", b"{not json", 422),
    ("POST", "/v1/systemone", body_of(spec_request(model="nope")), 400),
    ("GET", "/no/such/route", None, 404),
    ("DELETE", "/v1/systemone", None, 405),
]


@pytest.mark.parametrize(("method", "path", "body", "status"), ROUTES, ids=[f"{m} {p} {s}" for m, p, _, s in ROUTES])
def test_request_id_on_every_response(
    server: ServerProcess, method: str, path: str, body: bytes | None, status: int
) -> None:
    first = http_request(server.url, method, path, body, json_headers())
    second = http_request(server.url, method, path, body, json_headers())
    assert first.status == second.status == status
    assert first.request_id is not None, f"no x-typesafe-request-id on {method} {path} ({status})"
    assert second.request_id is not None
    assert REQUEST_ID.match(first.request_id)
    assert first.request_id != second.request_id


def server_timing(value: str) -> dict[str, float]:
    entries = {}
    for part in value.split(","):
        match = TIMING_ENTRY.match(part)
        assert match, f"bad Server-Timing entry {part!r} in {value!r}"
        entries[match[1]] = float(match[2])
    return entries


@pytest.mark.parametrize("n", [1, 3, 64])
def test_headers_and_usage(server: ServerProcess, n: int) -> None:
    reply = post_json(server.url, {"model": "jev-latest", "state": f"state for {n}", "questions": noul_questions(n)})
    assert reply.status == 200, reply.body
    body = reply.json()
    assert set(body["answers"]) == {f"q{i}" for i in range(n)}
    assert body["usage"]["output_tokens"] == n + 1

    prefix = int(reply.headers["x-openjev-prefix-tokens"])
    assert prefix > 0
    # input_tokens: the warm-up call (the prefix) plus every branch (prefix + its suffix).
    assert body["usage"]["input_tokens"] > (n + 1) * prefix
    cached = int(reply.headers["x-openjev-cached-tokens"])  # the fake reports cache hits
    assert cached >= 0

    timing = server_timing(reply.headers["server-timing"])
    assert list(timing) == ["prepare", "prefill", "branches"]
    assert all(v >= 0 for v in timing.values())

    # The same request again: every branch finds at least the shared prefix in the cache.
    again = post_json(server.url, {"model": "jev-latest", "state": f"state for {n}", "questions": noul_questions(n)})
    assert again.status == 200
    assert again.json()["answers"] == body["answers"]
    assert int(again.headers["x-openjev-cached-tokens"]) >= n * prefix


# --------------------------------------------------------------------------------------------
# Compressed bodies


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data)


@cache
def bomb(encoding: str) -> bytes:
    zeros = bytes(50 * 1024 * 1024)
    if encoding == "zstd":
        packed = zstd.compress(zeros)
    else:
        deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        packed = deflater.compress(zeros) + deflater.flush()
    assert len(packed) < 64 * 1024
    return packed


@pytest.mark.parametrize(("encoding", "compress"), [("gzip", gzip_bytes), ("zstd", zstd.compress)])
def test_compressed_bodies_give_the_same_answers(
    server: ServerProcess, encoding: str, compress: Callable[[bytes], bytes]
) -> None:
    big_state = [*SPEC_STATE, {"role": "user", "content": "More details. " * 200}]
    raw = body_of(spec_request(state=big_state))
    plain = post_json(server.url, spec_request(state=big_state))
    assert plain.status == 200
    packed = compress(raw)
    assert len(packed) < len(raw) // 4
    reply = http_request(server.url, "POST", "/v1/systemone", packed, json_headers(**{"Content-Encoding": encoding}))
    assert reply.status == 200, reply.body
    assert reply.json()["answers"] == plain.json()["answers"]
    assert reply.json()["usage"]["output_tokens"] == 4


def test_unsupported_or_corrupt_encodings_are_4xx(server: ServerProcess) -> None:
    raw = body_of(spec_request())
    brotli = http_request(server.url, "POST", "/v1/systemone", raw, json_headers(**{"Content-Encoding": "br"}))
    assert brotli.status == 415
    assert brotli.request_id is not None
    for encoding, data in [
        ("zstd", raw),
        ("gzip", raw),
        ("zstd", zstd.compress(raw)[:-8]),
        ("gzip", gzip.compress(raw)[:-8]),
    ]:
        reply = http_request(server.url, "POST", "/v1/systemone", data, json_headers(**{"Content-Encoding": encoding}))
        assert 400 <= reply.status < 500, (encoding, reply.status, reply.body)
        assert "detail" in reply.json()


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_compressed_bomb_is_refused_quickly_without_inflating(server: ServerProcess, encoding: str) -> None:
    packed = bomb(encoding)
    workers = server.worker_pids()
    assert workers, "no Granian worker process found"
    before = {pid: peak_rss_kib(pid) for pid in workers}
    reply = http_request(server.url, "POST", "/v1/systemone", packed, json_headers(**{"Content-Encoding": encoding}))
    assert reply.status == 413, reply.body
    assert error_type(reply) == "request_too_large"
    assert reply.elapsed < 2.0
    growth_mib = max(peak_rss_kib(pid) - before[pid] for pid in workers) / 1024
    assert growth_mib < 25, f"peak memory grew by {growth_mib:.0f} MiB: the bomb was inflated"
    assert server.is_healthy()
    assert post_json(server.url, spec_request()).status == 200


def test_body_over_the_limit_is_413(server: ServerProcess) -> None:
    huge = body_of(spec_request(state="x" * (3 * 1024 * 1024)))
    declared = http_request(server.url, "POST", "/v1/systemone", huge, json_headers())
    assert declared.status == 413
    assert error_type(declared) == "request_too_large"

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(huge), 64 * 1024):
            yield huge[i : i + 64 * 1024]

    chunked = http_request(server.url, "POST", "/v1/systemone", chunks(), json_headers())
    assert chunked.status == 413
    assert server.is_healthy()


BAD_BODIES: dict[str, bytes] = {
    "empty": b"",
    "not-json": b"{not json",
    "null": b"null",
    "array": b"[]",
    "invalid-utf8": b'{"model": "jev-latest", "state": "\xff\xfe", "questions": {}}',
    "no-state": body_of({"model": "jev-latest", "questions": SPEC_QUESTIONS}),
    "no-questions": body_of({"model": "jev-latest", "state": "x"}),
    "zero-questions": body_of(spec_request(questions={})),
    "questions-list": body_of(spec_request(questions=[SPEC_QUESTIONS["refund"]])),
    "state-number": body_of(spec_request(state=42)),
    "model-number": body_of(spec_request(model=7)),
    "empty-question-id": body_of(spec_request(questions={"": {"type": "noul"}})),
    "unknown-type": body_of(spec_request(questions={"q": {"type": "box"}})),
    "misspelt-field": body_of(spec_request(questions={"q": {"type": "noul", "critera": {}}})),
    "one-option": body_of(spec_request(questions={"q": {"type": "choice", "criteria": {"a": None}}})),
    "65-options": body_of(
        spec_request(questions={"q": {"type": "choice", "criteria": {f"o{i}": None for i in range(65)}}})
    ),
    "65-questions": body_of(spec_request(questions=noul_questions(65))),
    "score-map": body_of(spec_request(questions={"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}})),
    "score-numbers": body_of(spec_request(questions={"q": {"type": "score", "criteria": [1, 2]}})),
    "assets": body_of(spec_request(assets={"img": {"type": "image", "part": "asset-0"}})),
    "image-part": body_of(
        spec_request(
            state=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]
        )
    ),
    "deep-nesting": b'{"model": "jev-latest", "questions": {"q": {"type": "noul"}}, "state": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}",
    "huge-number": b'{"model": "jev-latest", "state": {"n": 1e999999}, "questions": {"q": {"type": "noul"}}}',
    "nan": b'{"model": "jev-latest", "state": {"n": NaN}, "questions": {"q": {"type": "noul"}}}',
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_requests_never_get_a_5xx(server: ServerProcess, name: str) -> None:
    reply = http_request(server.url, "POST", "/v1/systemone", BAD_BODIES[name], json_headers())
    assert 400 <= reply.status < 500, (reply.status, reply.body[:500])
    assert reply.request_id is not None
    detail = reply.json()["detail"]
    if reply.status == 422:
        assert isinstance(detail, list)
        assert detail
        for issue in detail:
            assert issue["loc"][0] == "body"
            assert isinstance(issue["msg"], str)
            assert isinstance(issue["type"], str)
    if name in {"assets", "image-part"}:
        assert reply.status == 422
        assert "only text" in detail[0]["msg"]


# --------------------------------------------------------------------------------------------
# Authentication, settings


def test_bearer_key_on_the_raw_api(keyed_server: ServerProcess) -> None:
    payload = body_of(spec_request())
    for auth in [None, "Bearer wrong", f"Basic {API_KEY}", f"Bearer {API_KEY}x", "Bearer"]:
        headers = json_headers() if auth is None else json_headers(Authorization=auth)
        reply = http_request(keyed_server.url, "POST", "/v1/systemone", payload, headers)
        assert reply.status == 401, auth
        assert error_type(reply) == "authentication_error"
        assert reply.headers.get("www-authenticate", "").lower().startswith("bearer")
        assert http_request(keyed_server.url, "GET", "/v1/models", None, headers).status == 401
    for auth in [f"Bearer {API_KEY}", f"bearer {API_KEY}"]:
        ok = http_request(keyed_server.url, "POST", "/v1/systemone", payload, json_headers(Authorization=auth))
        assert ok.status == 200, auth
    # Readiness and docs stay open for probes and browsers.
    assert http_request(keyed_server.url, "GET", "/health").status == 200
    assert http_request(keyed_server.url, "GET", "/health/live").status == 200


def test_limits_report_the_settings_in_force(slow_server: ServerProcess, timeout_server: ServerProcess) -> None:
    slow = http_request(slow_server.url, "GET", "/v1/limits").json()["limits"]
    assert slow["max_concurrent_requests"] == 2
    assert slow["max_questions"] == 64
    assert slow["max_options"] == 64
    assert slow["max_body_bytes"] == 2 * 1024 * 1024
    assert slow["max_input_tokens"] == 32_768
    assert slow["max_total_input_tokens"] == 262_144
    assert slow["max_concurrent_branches"] == 64
    timed = http_request(timeout_server.url, "GET", "/v1/limits").json()["limits"]
    assert timed["request_timeout_seconds"] == pytest.approx(0.3)
    assert timed["max_concurrent_requests"] == 16


def softmax_power(probabilities: dict[str, float], power: float) -> dict[str, float]:
    """p^power renormalized: the distribution at temperature 1/power, from the one at temperature 1."""
    raised = {k: v**power for k, v in probabilities.items()}
    total = sum(raised.values())
    return {k: v / total for k, v in raised.items()}


def test_answer_settings_reach_the_worker(server: ServerProcess, tuned_server: ServerProcess) -> None:
    """Temperature 2 flattens p to p^(1/2); the TypeSafe confidence formulas; 100 options; 3 questions."""
    levels = ["none", "low", "mid", "high", "max"]
    questions = {
        "yes": {"type": "noul", "instructions": "Is it so?"},
        "pick": {"type": "choice", "criteria": {f"opt {i}": None for i in range(6)}},
        "rate": {"type": "score", "criteria": levels},
    }
    base = post_json(server.url, spec_request(questions=questions)).json()["answers"]
    tuned = post_json(tuned_server.url, spec_request(questions=questions)).json()["answers"]

    p_yes = base["yes"]["noul"]
    assert tuned["yes"]["noul"] == pytest.approx(softmax_power({"y": p_yes, "n": 1 - p_yes}, 0.5)["y"], abs=1e-9)
    assert tuned["yes"]["noul"] != pytest.approx(p_yes, abs=1e-6)

    pick = tuned["pick"]["probabilities"]
    assert pick == pytest.approx(softmax_power(base["pick"]["probabilities"], 0.5), abs=1e-9)
    n = len(pick)
    assert tuned["pick"]["confidence"] == pytest.approx((max(pick.values()) - 1 / n) / (1 - 1 / n), abs=1e-9)

    rate = {int(k): v for k, v in tuned["rate"]["probabilities"].items()}
    assert rate == pytest.approx(
        {int(k): v for k, v in softmax_power(base["rate"]["probabilities"], 0.5).items()}, abs=1e-9
    )
    n = len(levels)
    mode = max(rate, key=lambda i: rate[i])
    u = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    expected = max(0.0, 1 - sum(p * abs(i - mode) for i, p in rate.items()) / u)
    assert tuned["rate"]["confidence"] == pytest.approx(expected, abs=1e-9)
    assert tuned["rate"]["score"] == pytest.approx(sum(i * p for i, p in rate.items()), abs=1e-9)

    # OPENJEV_MAX_OPTIONS=100: 100 options are answered there, refused by the default server.
    hundred = {"many": {"type": "choice", "criteria": {f"option {i}": None for i in range(100)}}}
    reply = post_json(tuned_server.url, spec_request(questions=hundred))
    assert reply.status == 200, reply.body
    assert len(reply.json()["answers"]["many"]["probabilities"]) == 100
    assert post_json(server.url, spec_request(questions=hundred)).status == 422
    # OPENJEV_MAX_QUESTIONS=3.
    assert post_json(tuned_server.url, spec_request(questions=noul_questions(4))).status == 422


def test_token_limits_are_422_and_large_bodies_are_answered(server: ServerProcess) -> None:
    # ~100 KB of questions (prepared off the event loop), within every token limit.
    wordy = {f"q{i}": {"type": "noul", "instructions": f"{i} " + "word " * 300} for i in range(64)}
    big = post_json(server.url, spec_request(state="short", questions=wordy))
    assert big.status == 200, big.body[:300]
    assert len(big.json()["answers"]) == 64
    assert big.json()["usage"]["output_tokens"] == 65
    # One branch over the per-question context (32,768 tokens): 422 naming that question.
    long_state = post_json(server.url, spec_request(state="x" * 40_000, questions={"only": {"type": "noul"}}))
    assert long_state.status == 422
    [issue] = long_state.json()["detail"]
    assert issue["loc"] == ["body", "questions", "only"]
    assert issue["type"] == "tokens_exceeded"
    # Every branch fits, the sum does not (262,144 input tokens per request): 422 on the body.
    heavy = {f"q{i}": {"type": "noul", "instructions": "word " * 4000} for i in range(64)}
    total = post_json(server.url, spec_request(state="s", questions=heavy))
    assert total.status == 422
    assert total.json()["detail"][0]["loc"] == ["body"]
    assert "262144" in total.json()["detail"][0]["msg"]


# --------------------------------------------------------------------------------------------
# Answer independence


QUESTIONS: dict[str, dict[str, Any]] = {
    "noul": {"type": "noul", "instructions": "Is the customer angry?", "criteria": {"true": "Angry"}},
    "choice": {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Payments", "technical": None, "sales": "New contracts"},
    },
    "score": {"type": "score", "instructions": "How urgent?", "criteria": ["Low", "Medium", "High", "Critical"]},
}
OTHERS: dict[str, dict[str, Any]] = {
    "other-noul": {"type": "noul", "instructions": "Is it spam?"},
    "other-choice": {"type": "choice", "criteria": {"x": None, "y": "Why"}},
    "other-score": {"type": "score", "criteria": ["a", "b"]},
}
STATE = [{"role": "user", "content": "My invoice is wrong and I am furious. Fix it today."}]


def answer_for(server: ServerProcess, questions: dict[str, Any], qid: str, state: Any = STATE) -> dict[str, Any]:
    reply = post_json(server.url, {"model": "jev-latest", "state": state, "questions": questions})
    assert reply.status == 200, reply.body
    answer: dict[str, Any] = reply.json()["answers"][qid]
    return answer


@pytest.mark.parametrize("kind", list(QUESTIONS))
def test_answer_does_not_depend_on_id_or_other_questions(server: ServerProcess, kind: str) -> None:
    q = QUESTIONS[kind]
    alone = answer_for(server, {"first-id": q}, "first-id")
    variants = {
        "renamed": ({"a completely different id ✓": q}, "a completely different id ✓"),
        "others-after": ({"x": q, **OTHERS}, "x"),
        "others-before": ({**OTHERS, "y": q}, "y"),
        "all-reordered": (
            {**dict(reversed(list(OTHERS.items()))), **{k: v for k, v in QUESTIONS.items() if k != kind}, "z": q},
            "z",
        ),
        "duplicated": ({"copy-1": q, "copy-2": q}, "copy-2"),
    }
    for name, (questions, qid) in variants.items():
        assert answer_for(server, questions, qid) == alone, name
    # Not a tautology: what the model does see changes the answer.
    reworded = q | {"instructions": q["instructions"] + " Think again."}
    assert answer_for(server, {"first-id": reworded}, "first-id") != alone
    assert answer_for(server, {"first-id": q}, "first-id", state="A calm thank-you note.") != alone


def test_other_answers_in_a_request_are_independent_too(server: ServerProcess) -> None:
    together = post_json(server.url, {"model": "jev-latest", "state": STATE, "questions": {**QUESTIONS, **OTHERS}})
    assert together.status == 200
    answers = together.json()["answers"]
    for qid, q in {**QUESTIONS, **OTHERS}.items():
        assert answer_for(server, {"solo": q}, "solo") == answers[qid], qid
