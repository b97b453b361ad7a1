"""A small System One server on loopback for the smoke tests: an oracle with knobs.

It answers the smoke's obvious questions correctly (0.9 on the right answer) and everything else
with a fixed decreasing distribution, so the tests control exactly what a "correct" server says.
Knobs turn it into a broken server: labels reversed (`swap`), a higher option limit, 503s with
Retry-After while "waking up", a bearer key, a bad shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from openjev.smoke.checks import SEMANTIC_CASES

STUB_MODEL = "stub/oracle"


def options_of(question: Mapping[str, Any]) -> list[str]:
    if question["type"] == "noul":
        return ["yes", "no"]
    if question["type"] == "choice":
        return list(question["criteria"])
    return [str(i) for i in range(len(question["criteria"]))]


def answer_for(question: Mapping[str, Any], probabilities: Sequence[float]) -> dict[str, Any]:
    """The answer (docs/spec.md#the-response) for a distribution over the question's labels, in label order."""
    if question["type"] == "noul":
        return {"type": "noul", "noul": probabilities[0]}
    n = len(probabilities)
    entropy = -math.fsum(p * math.log(p) for p in probabilities if p > 0)
    confidence = min(1.0, max(0.0, 1.0 - entropy / math.log(n)))
    keys = options_of(question)
    distribution = dict(zip(keys, probabilities, strict=True))
    if question["type"] == "choice":
        best = max(range(n), key=lambda i: probabilities[i])
        return {
            "type": "choice",
            "choice": keys[best],
            "confidence": confidence,
            "probabilities": distribution,
        }
    return {
        "type": "score",
        "score": math.fsum(i * p for i, p in enumerate(probabilities)),
        "confidence": confidence,
        "legend": dict(zip(keys, question["criteria"], strict=True)),
        "probabilities": distribution,
    }


def correct_distribution(state: Any, question: Mapping[str, Any]) -> list[float]:
    """What a model that gets the obvious cases right says, in label order (yes first for noul)."""
    labels = options_of(question)
    n = len(labels)
    for case in SEMANTIC_CASES:
        if case.state == state and case.question == question:
            right = 0 if case.expect is True else 1 if case.expect is False else labels.index(str(case.expect))
            return [0.9 if i == right else 0.1 / (n - 1) for i in range(n)]
    weights = [float(n - i) for i in range(n)]
    total = math.fsum(weights)
    return [w / total for w in weights]


@dataclass
class StubServer:
    swap: bool = False
    max_options: int = 64
    waking_requests: int = 0  # answer this many requests (any route) with 503 + Retry-After first
    edge_not_found: int = 0  # before that, this many plain-text 404s, as a proxy whose route is not live yet
    health_refusal: int | None = None  # answer GET /health with this 4xx and the server's own error body
    retry_after: str = "1"
    busy_posts: int = 0  # then answer this many POSTs with 529 + Retry-After (overloaded)
    key: str | None = None
    cached_tokens_header: bool = False  # the cache header is sent only when this is set
    break_shape: bool = False  # report a noul probability of 1.5
    decisions: bool = True  # serve POST /v1/decisions (System One servers elsewhere may not)
    decisions_swap: bool = False  # Decisions answers with the labels reversed
    seen: list[str] = field(default_factory=list)
    runner: web.AppRunner | None = None

    async def start(self, port: int) -> str:
        app = web.Application(middlewares=[self._gate])
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/systemone", self._systemone)
        if self.decisions:
            app.router.add_post("/v1/decisions", self._decisions)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.seen.append(f"{request.method} {request.path}")
        if self.edge_not_found > 0:
            self.edge_not_found -= 1
            return web.Response(status=404, text="404 page not found")
        if self.waking_requests > 0:
            self.waking_requests -= 1
            return web.json_response(
                {"detail": {"error_type": "not_ready", "message": "starting"}},
                status=503,
                headers={"Retry-After": self.retry_after},
            )
        if self.busy_posts > 0 and request.method == "POST":
            self.busy_posts -= 1
            body = {"detail": {"error_type": "overloaded", "message": "busy"}}
            return web.json_response(body, status=529, headers={"Retry-After": self.retry_after})
        authorized = request.headers.get("Authorization") == f"Bearer {self.key}"
        if self.key is not None and request.path != "/health" and not authorized:
            body = {"detail": {"error_type": "authentication_error", "message": "bad key"}}
            return web.json_response(body, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    async def _health(self, request: web.Request) -> web.Response:
        if self.health_refusal is not None:
            body = {"detail": {"error_type": "authentication_error", "message": "bad key"}}
            return web.json_response(body, status=self.health_refusal)
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in ("jev-latest", STUB_MODEL)]
        return web.json_response({"object": "list", "data": data, "models": []})

    async def _systemone(self, request: web.Request) -> web.Response:
        body = await request.json()
        questions: dict[str, Any] = body["questions"]
        for qid, question in questions.items():
            if question["type"] != "noul" and len(question["criteria"]) > self.max_options:
                detail = [{"loc": ["body", "questions", qid, "criteria"], "msg": "too many", "type": "value_error"}]
                return web.json_response({"detail": detail}, status=422)
        answers = {}
        for qid, question in questions.items():
            p = correct_distribution(body["state"], question)
            answers[qid] = answer_for(question, p[::-1] if self.swap else p)
            if self.break_shape and question["type"] == "noul":
                answers[qid]["noul"] = 1.5
        headers = {"x-typesafe-request-id": f"req-{len(self.seen)}", "x-openjev-prefix-tokens": "42"}
        if self.cached_tokens_header:
            headers["x-openjev-cached-tokens"] = "0"
        usage = {"input_tokens": 100, "output_tokens": len(questions) + 1}
        return web.json_response({"model": STUB_MODEL, "answers": answers, "usage": usage}, headers=headers)

    async def _decisions(self, request: web.Request) -> web.Response:
        """OpenAI's Decisions shapes, answering like `_systemone` (the obvious predicates right)."""
        body = await request.json()
        if body["model"] not in ("jev-latest", STUB_MODEL):
            error = {
                "message": "no such model",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
            return web.json_response({"error": error}, status=404)
        answers = []
        for i, question in enumerate(body["questions"]):
            options = question.get("choices") or question.get("levels") or [True, False]
            if len(options) > 64:
                error = {"message": "too many", "type": "invalid_request_error", "param": f"questions[{i}].choices"}
                return web.json_response({"error": {**error, "code": "too_many_options"}}, status=400)
            answers.append(decision_answer(body["input"], question, self.decisions_swap))
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": len(answers) + 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 100 + len(answers) + 1,
        }
        request_id = f"req-{len(self.seen)}"
        headers = {"x-typesafe-request-id": request_id, "x-request-id": request_id, "x-openjev-prefix-tokens": "42"}
        return web.json_response({"answers": answers, "model": STUB_MODEL, "usage": usage}, headers=headers)


def decision_answer(input: Any, question: Mapping[str, Any], swap: bool) -> dict[str, Any]:
    """A Decisions answer: an obvious satisfied/unsatisfied predicate right, else a decreasing distribution."""
    name = question.get("name")
    if question["type"] == "predicate":
        obvious = {case.state: case.expect for case in SEMANTIC_CASES if case.question["type"] == "noul"}
        expect = obvious.get(input) if isinstance(input, str) else None
        p = 0.9 if expect is True else 0.1 if expect is False else 0.6
        return {"type": "predicate", "name": name, "probability": 1 - p if swap else p}
    options = question["choices"] if question["type"] == "choice" else question["levels"]
    n = len(options)
    weights = [float(n - i) for i in range(n)]
    dist = [w / math.fsum(weights) for w in weights]
    confidence = (max(dist) - 1 / n) / (1 - 1 / n)
    if question["type"] == "choice":
        entries = [{"value": o["value"], "probability": q} for o, q in zip(options, dist, strict=True)]
        return {
            "type": "choice",
            "name": name,
            "choice": options[0]["value"],
            "confidence": confidence,
            "probabilities": entries,
        }
    levels = enumerate(zip(options, dist, strict=True))
    entries = [{"value": i, "label": o["label"], "probability": q} for i, (o, q) in levels]
    score = math.fsum(i * q for i, q in enumerate(dist))
    return {"type": "score", "name": name, "score": score, "confidence": confidence, "probabilities": entries}
