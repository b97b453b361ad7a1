"""GET /metrics, scraped with prometheus_client's own parser after real requests through the app."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.api.conftest import Client

CHOICE = {"type": "choice", "instructions": "Topic?", "criteria": {"a": "first", "b": "second", "c": None}}
BODY: dict[str, Any] = {
    "model": "jev-latest",
    "state": "A short text.",
    "questions": {"yes": {"type": "noul", "instructions": "Is it short?"}, "topic": CHOICE},
}


async def scrape(client: Client, **headers: str) -> list[Sample]:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return [s for family in text_string_to_metric_families(response.text) for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


async def test_the_counts_follow_real_requests(server: Any) -> None:
    async with server() as client:
        answered = [(await client.post("/v1/systemone", json=BODY)).json() for _ in range(2)]
        debiased = [await client.post("/v1/systemone", json={**BODY, "x_debias": "rotate+calibrate"}) for _ in range(2)]
        assert [r.status_code for r in debiased] == [200, 200]
        assert (await client.post("/v1/systemone", json={**BODY, "questions": {}})).status_code == 422
        assert (await client.get("/no/such/route/abc123")).status_code == 404
        samples = await scrape(client)

    route = "/v1/systemone"
    assert value(samples, "openjev_http_requests_total", route=route, status="200") == 4
    assert value(samples, "openjev_http_requests_total", route=route, status="422") == 1
    assert value(samples, "openjev_http_requests_total", route="unmatched", status="404") == 1
    assert value(samples, "openjev_http_request_duration_seconds_count", route=route) == 5
    for phase in ("prepare", "prefill", "branches"):
        assert value(samples, "openjev_evaluation_phase_seconds_count", phase=phase) == 4
        assert value(samples, "openjev_evaluation_phase_seconds_sum", phase=phase) > 0
    assert value(samples, "openjev_request_questions_count") == 4
    assert value(samples, "openjev_request_questions_sum") == 8
    usages = [a["usage"] for a in answered] + [r.json()["usage"] for r in debiased]
    assert [u["output_tokens"] for u in usages[:2]] == [3, 3]  # warm-up + 2 branches
    assert value(samples, "openjev_request_backend_calls_sum") == sum(u["output_tokens"] for u in usages)
    extra = [u["output_tokens"] - 1 - 2 for u in usages[2:]]  # calls beyond warm-up + one per question
    assert extra[0] > extra[1] > 0  # the second debiased request found its priors in the cache
    assert value(samples, "openjev_debias_extra_calls_total") == sum(extra)
    assert value(samples, "openjev_prior_cache_hits_total") == extra[0] - extra[1]
    assert value(samples, "openjev_input_tokens_total") == sum(u["input_tokens"] for u in usages)
    assert value(samples, "openjev_prefix_tokens_total") > 0
    cached = value(samples, "openjev_cached_tokens_total")
    assert 0 < cached <= value(samples, "openjev_cache_reported_input_tokens_total")
    assert value(samples, "openjev_backend_up") == 1
    assert value(samples, "openjev_backend_state", openjev_backend_state="ok") == 1
    assert value(samples, "openjev_backend_state", openjev_backend_state="down") == 0
    assert value(samples, "openjev_startup_seconds") > 0
    assert value(samples, "openjev_http_requests_in_flight") == 1  # the scrape itself
    assert value(samples, "openjev_evaluations_running") == 0
    assert value(samples, "openjev_info", backend="fake") == 1
    # Bounded labels: no request id, no raw path, no model name anywhere.
    label_values = {v for s in samples for v in s.labels.values()}
    assert not any("abc123" in v or "jev" in v or "fake/" in v for v in label_values)


async def test_529_and_504_are_counted(server: Any) -> None:
    async with server(max_concurrent_requests=1, fake_latency=0.3, request_timeout=0.2) as client:
        assert (await client.post("/v1/systemone", json=BODY)).status_code == 504
        service = client.app.state.service
        with service.admission.slot():  # every slot taken: the next request is refused
            assert (await client.post("/v1/systemone", json=BODY)).status_code == 529
        samples = await scrape(client)
    assert value(samples, "openjev_overloaded_responses_total") == 1
    assert value(samples, "openjev_timeout_responses_total") == 1
    assert value(samples, "openjev_http_requests_total", route="/v1/systemone", status="529") == 1
    assert value(samples, "openjev_http_requests_total", route="/v1/systemone", status="504") == 1


async def test_metrics_need_the_key_unless_opened(server: Any) -> None:
    async with server({"OPENJEV_API_KEY": "sekret"}) as client:
        assert (await client.get("/metrics")).status_code == 401
        await scrape(client, authorization="Bearer sekret")
    async with server({"OPENJEV_API_KEY": "sekret", "OPENJEV_METRICS_PUBLIC": "true"}) as client:
        await scrape(client)
        assert (await client.get("/v1/limits")).status_code == 401


async def test_two_apps_keep_separate_counts(server: Any) -> None:
    async with server() as one, server() as two:
        assert (await one.post("/v1/systemone", json=BODY)).status_code == 200
        assert value(await scrape(two), "openjev_request_questions_count") == 0
        assert value(await scrape(one), "openjev_request_questions_count") == 1
