"""The official TypeSafe SDK (`typesafe_sdk`) against the real openjev process (fake backend)."""

from __future__ import annotations

import asyncio
import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any, cast

import httpx2
import pytest
from backports import zstd
from typesafe_sdk import (
    AsyncTypeSafeClient,
    Choice,
    Noul,
    RetryPolicy,
    Score,
    SystemOneResponse,
    TypeSafeAuthenticationError,
    TypeSafeBadRequestError,
    TypeSafeClient,
    TypeSafeUnprocessableEntityError,
)

from tests.blackbox.conftest import API_KEY, REQUEST_ID, SPEC_QUESTIONS, SPEC_STATE, ServerProcess, post_json

NO_RETRY = RetryPolicy(max_retries=0)


def client(server: ServerProcess, **kwargs: Any) -> TypeSafeClient:
    kwargs.setdefault("api_key", "any-key-the-server-ignores")
    kwargs.setdefault("retry", NO_RETRY)
    kwargs.setdefault("timeout", 30.0)
    return TypeSafeClient(base_url=server.url, **kwargs)


def async_client(server: ServerProcess, **kwargs: Any) -> AsyncTypeSafeClient:
    kwargs.setdefault("api_key", "any-key-the-server-ignores")
    kwargs.setdefault("retry", NO_RETRY)
    kwargs.setdefault("timeout", 30.0)
    return AsyncTypeSafeClient(base_url=server.url, **kwargs)


def sdk_questions() -> dict[str, Any]:
    """The specification's example questions (docs/spec.md) as SDK objects."""
    return {
        "refund": Noul(instructions="Does the user request a refund?"),
        "department": Choice(
            instructions="Which department should handle this?",
            criteria={"billing": "Payments and refunds", "technical": "Software bugs"},
        ),
        "urgency": Score(instructions="How urgent is the request?", criteria=["Routine", "Urgent", "Emergency"]),
    }


def typesafe_choice_confidence(probabilities: Mapping[Any, float]) -> float:
    """TypeSafe's documented formula, the default: (p_max − 1/n) / (1 − 1/n)."""
    n = len(probabilities)
    return (max(probabilities.values()) - 1 / n) / (1 - 1 / n)


def typesafe_score_confidence(probabilities: Mapping[int, float]) -> float:
    """max(0, 1 − Σ p_i·|i − mode| / u), u the mean absolute deviation of the uniform over the levels."""
    n = len(probabilities)
    mode = max(probabilities, key=lambda i: probabilities[i])
    spread = sum(p * abs(i - mode) for i, p in probabilities.items())
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, 1 - spread / uniform)


def check_distribution(probabilities: Mapping[Any, float]) -> None:
    values = list(probabilities.values())
    assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values), values
    assert abs(sum(values) - 1.0) < 1e-6


def check_choice(answer: Any, names: list[str]) -> None:
    assert set(answer.probabilities) == set(names)
    check_distribution(answer.probabilities)
    assert answer.choice in names
    assert answer.probabilities[answer.choice] == max(answer.probabilities.values())
    assert answer.confidence == pytest.approx(typesafe_choice_confidence(answer.probabilities), abs=1e-9)


def check_score(answer: Any, levels: list[Any]) -> None:
    assert answer.legend == dict(enumerate(levels))
    assert set(answer.probabilities) == set(range(len(levels)))
    check_distribution(answer.probabilities)
    expected = sum(i * p for i, p in answer.probabilities.items())
    assert answer.score == pytest.approx(expected, abs=1e-9)
    assert 0.0 <= answer.score <= len(levels) - 1
    assert answer.confidence == pytest.approx(typesafe_score_confidence(answer.probabilities), abs=1e-9)


def check_spec_answers(result: SystemOneResponse) -> None:
    assert set(result.answers) == {"refund", "department", "urgency"}
    assert result.model == "openjev/fake"
    assert 0.0 <= result.nouls["refund"].noul <= 1.0
    check_choice(result.choices["department"], ["billing", "technical"])
    check_score(result.scores["urgency"], ["Routine", "Urgent", "Emergency"])
    assert result.usage.output_tokens == 4
    assert result.usage.input_tokens is not None
    assert result.usage.input_tokens > 0


def answers_of(result: SystemOneResponse) -> dict[str, Any]:
    return {name: answer.model_dump() for name, answer in result.answers.items()}


def test_sync_client_parses_every_answer_type_of_the_spec_example(server: ServerProcess) -> None:
    with client(server) as sdk:
        result = sdk.system_one(state=SPEC_STATE, questions=sdk_questions())
    check_spec_answers(result)
    # The SDK's parsed values are exactly what the server sent (same request, raw HTTP).
    raw = post_json(server.url, {"model": "jev-latest", "state": SPEC_STATE, "questions": SPEC_QUESTIONS})
    assert raw.status == 200
    wire = raw.json()["answers"]
    assert result.nouls["refund"].noul == wire["refund"]["noul"]
    assert result.choices["department"].probabilities == wire["department"]["probabilities"]
    assert result.scores["urgency"].score == wire["urgency"]["score"]
    assert {str(k): v for k, v in result.scores["urgency"].probabilities.items()} == wire["urgency"]["probabilities"]


def test_sdk_accepts_dict_questions_and_every_model_name(server: ServerProcess) -> None:
    with client(server) as sdk:
        by_alias = sdk.system_one(state=SPEC_STATE, questions=SPEC_QUESTIONS)
        by_public = sdk.system_one(state=SPEC_STATE, questions=SPEC_QUESTIONS, model="openjev/fake")
        with_objects = sdk.system_one(state=SPEC_STATE, questions=sdk_questions())
    check_spec_answers(by_alias)
    assert answers_of(by_alias) == answers_of(by_public) == answers_of(with_objects)


async def test_async_client_gives_the_same_answers(server: ServerProcess) -> None:
    async with async_client(server) as sdk:
        results = await asyncio.gather(
            sdk.system_one(state=SPEC_STATE, questions=sdk_questions()),
            sdk.system_one(state=SPEC_STATE, questions=SPEC_QUESTIONS),
        )
        models = await sdk.models.list()
    for result in results:
        check_spec_answers(result)
    with client(server) as sync_sdk:
        sync_result = sync_sdk.system_one(state=SPEC_STATE, questions=sdk_questions())
    assert answers_of(results[0]) == answers_of(results[1]) == answers_of(sync_result)
    assert {m.name for m in models.models} >= {"jev-latest", "openjev/fake"}


UNICODE_NAMES = [
    "billing",
    "технический отдел",
    "請求書",
    "🚀 launch",
    "👩‍👩‍👧 family (ZWJ)",
    unicodedata.normalize("NFC", "café"),
    unicodedata.normalize("NFD", "café"),  # a different string: both must survive, distinct
    "שלום",
    'a "quoted" name',
    "back\\slash",
    "tab\there",
    "  padded  ",
    "A",  # looks like a label, must still be an option name
    "AA",
    "10",
    "∑ x²",
]


def sixty_four_names() -> list[str]:
    names = list(UNICODE_NAMES)
    names += [f"option {i} — ñ" for i in range(64 - len(names))]
    assert len(names) == len(set(names)) == 64
    return names


def test_sync_client_unicode_and_64_options(server: ServerProcess) -> None:
    names = sixty_four_names()
    criteria: dict[str, Any] = {
        name: (None if i % 3 == 0 else {"meaning": f"description {i}"} if i % 3 == 1 else f"desc {i} ✓")
        for i, name in enumerate(names)
    }
    levels: list[Any] = [f"level {i} — ünïcødé" for i in range(64)]
    levels[5] = {"rubric": "an object level", "n": 5}
    levels[6] = ["a", "list", "level"]
    questions: dict[str, Choice | Score | Noul] = {
        "référence ✓": Choice(instructions="Which one? 🤔", criteria=criteria),
        "问题": Score(instructions={"task": "rate it"}, criteria=levels),
        "oui ou non": Noul(criteria={"true": "Oui", "false": None}),  # one-sided criteria, no instructions
    }
    with client(server) as sdk:
        result = sdk.system_one(state={"ticket": "Ünïcødé ✓ state", "lines": ["a", "b"]}, questions=questions)
    assert set(result.answers) == {"référence ✓", "问题", "oui ou non"}
    choice = result.choices["référence ✓"]
    check_choice(choice, names)
    # Names come back byte for byte, NFC and NFD forms kept apart.
    assert [n.encode() for n in sorted(choice.probabilities)] == [n.encode() for n in sorted(names)]
    check_score(result.scores["问题"], levels)
    assert result.usage.output_tokens == 4


async def test_async_client_64_options_and_64_questions(server: ServerProcess) -> None:
    names = sixty_four_names()
    questions: dict[str, Any] = {f"q{i} ✓": Noul(instructions=f"Is statement {i} true?") for i in range(62)}
    questions["pick"] = Choice(criteria=dict.fromkeys(names))
    questions["rate"] = Score(criteria=[f"L{i}" for i in range(64)])
    async with async_client(server) as sdk:
        result = await sdk.system_one(state="A short state.", questions=questions)
    assert set(result.answers) == set(questions)
    assert len(result.nouls) == 62
    check_choice(result.choices["pick"], names)
    check_score(result.scores["rate"], [f"L{i}" for i in range(64)])
    assert result.usage.output_tokens == 65


def test_list_models(server: ServerProcess) -> None:
    with client(server) as sdk:
        listed = sdk.models.list()
    names = [m.name for m in listed.models]
    assert "jev-latest" in names
    assert "openjev/fake" in names
    assert all(isinstance(m.release_date, str) and m.description for m in listed.models)
    assert REQUEST_ID.match(listed.request_id)


def test_unknown_model_message_reaches_the_sdk(server: ServerProcess) -> None:
    with client(server) as sdk, pytest.raises(TypeSafeBadRequestError) as info:
        sdk.system_one(state="hi", questions={"q": Noul(instructions="Yes?")}, model="no-such-model-xyz")
    error = info.value
    assert error.status == 400
    assert error.body["detail"]["error_type"] == "unknown_model"
    message = error.body["detail"]["message"]
    assert "no-such-model-xyz" in message
    assert message in str(error)
    assert "jev-latest" in str(error)  # the message tells which models are served
    assert error.request_id is not None
    assert REQUEST_ID.match(error.request_id)


def test_validation_detail_reaches_the_sdk(server: ServerProcess) -> None:
    too_many = {f"o{i}": None for i in range(65)}
    with client(server) as sdk, pytest.raises(TypeSafeUnprocessableEntityError) as info:
        sdk.system_one(
            state="hi",
            questions={"many": {"type": "choice", "criteria": too_many}, "ok": Noul(instructions="Yes?")},
        )
    error = info.value
    assert error.status == 422
    detail = error.body["detail"]
    assert isinstance(detail, list)
    assert detail
    assert all(isinstance(d["msg"], str) and isinstance(d["type"], str) for d in detail)
    assert detail[0]["loc"] == ["body", "questions", "many", "criteria"]
    # The SDK renders each entry as `path: msg` (without the leading "body").
    assert f"questions.many.criteria: {detail[0]['msg']}" in str(error)
    assert "65" in str(error)


def test_score_map_criteria_is_a_422_in_the_sdk(server: ServerProcess) -> None:
    with client(server) as sdk, pytest.raises(TypeSafeUnprocessableEntityError) as info:
        sdk.system_one(
            state="hi",
            questions={"lvl": cast(Any, {"type": "score", "criteria": {"0": "low", "1": "high"}})},
        )
    detail = info.value.body["detail"]
    assert detail[0]["loc"][:3] == ["body", "questions", "lvl"]
    assert "questions.lvl" in str(info.value)


def test_wrong_key_is_401_and_right_key_works(keyed_server: ServerProcess) -> None:
    with client(keyed_server, api_key="wrong-key") as sdk:
        with pytest.raises(TypeSafeAuthenticationError) as info:
            sdk.system_one(state="hi", questions={"q": Noul(instructions="Yes?")})
        with pytest.raises(TypeSafeAuthenticationError):
            sdk.models.list()
    error = info.value
    assert error.status == 401
    assert error.body["detail"]["error_type"] == "authentication_error"
    assert error.body["detail"]["message"] in str(error)
    assert error.request_id is not None
    assert REQUEST_ID.match(error.request_id)

    with client(keyed_server, api_key=API_KEY) as sdk:
        result = sdk.system_one(state=SPEC_STATE, questions=sdk_questions())
        listed = sdk.models.list()
    check_spec_answers(result)
    assert "jev-latest" in {m.name for m in listed.models}


async def test_async_wrong_key_is_401(keyed_server: ServerProcess) -> None:
    async with async_client(keyed_server, api_key=API_KEY + "x") as sdk:
        with pytest.raises(TypeSafeAuthenticationError):
            await sdk.system_one(state="hi", questions={"q": Noul(instructions="Yes?")})


class Recorder:
    """httpx2 request hook: what the SDK really put on the wire."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []

    def __call__(self, request: httpx2.Request) -> None:
        self.requests.append(({k.lower(): v for k, v in request.headers.items()}, bytes(request.content)))


def test_sdk_zstd_compression_is_understood(server: ServerProcess) -> None:
    state = "The customer writes: " + " ".join(f"line {i}: I was charged twice, please refund." for i in range(80))
    assert len(state.encode()) > 2048
    compressed_log, plain_log = Recorder(), Recorder()
    with client(server, http_client=httpx2.Client(event_hooks={"request": [compressed_log]})) as sdk:
        assert sdk._config.compression == "zstd"  # the SDK resolved zstd (the [zstd] extra is installed)
        compressed = sdk.system_one(state=state, questions=sdk_questions())
    with client(server, compression=False, http_client=httpx2.Client(event_hooks={"request": [plain_log]})) as sdk:
        plain = sdk.system_one(state=state, questions=sdk_questions())

    [(headers, body)] = compressed_log.requests
    assert headers.get("content-encoding") == "zstd"
    inflated = zstd.decompress(body)
    assert len(body) < len(inflated)
    assert json.loads(inflated)["state"] == state
    [(plain_headers, plain_body)] = plain_log.requests
    assert "content-encoding" not in plain_headers
    assert json.loads(plain_body) == json.loads(inflated)

    check_spec_answers(compressed)
    assert answers_of(compressed) == answers_of(plain)
    assert compressed.usage == plain.usage


def test_sdk_request_id_is_our_header(server: ServerProcess) -> None:
    with client(server) as sdk:
        first = sdk.system_one(state="one", questions={"q": Noul(instructions="Yes?")})
        second = sdk.system_one(state="one", questions={"q": Noul(instructions="Yes?")})
    for result in (first, second):
        assert REQUEST_ID.match(result.request_id)
        assert result.request_id == result.raw_http_response.headers["x-typesafe-request-id"]
    assert first.request_id != second.request_id


async def test_sdk_retries_529_honouring_retry_after(slow_server: ServerProcess) -> None:
    """Limit 2, 1 s per evaluation: of 4 concurrent SDK calls some get 529 first, all end in 200."""
    statuses: list[int] = []

    async def on_response(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    policy = RetryPolicy(max_retries=8, backoff_initial=0.2, backoff_max=1.0)
    http = httpx2.AsyncClient(event_hooks={"response": [on_response]})
    async with async_client(slow_server, retry=policy, http_client=http, timeout=30.0) as sdk:
        results = await asyncio.gather(
            *(sdk.system_one(state=f"state {i}", questions={"q": Noul(instructions="Yes?")}) for i in range(4))
        )
    assert all(0.0 <= r.nouls["q"].noul <= 1.0 for r in results)
    assert statuses.count(200) == 4
    assert 529 in statuses
    assert set(statuses) <= {200, 529}


def test_worked_examples_go_through_the_sdk_as_dict_questions(server: ServerProcess) -> None:
    team: dict[str, Any] = {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Payments and refunds", "tech": "Software bugs"},
    }
    solved = [{"state": "Refund the double charge.", "answer": "billing"}, {"state": "It crashes.", "answer": "tech"}]
    bare: Any = {"team": team}  # the SDK passes dict questions through as they are
    taught: Any = {"team": {**team, "x_examples": solved}}
    wrong: Any = {"team": {**team, "x_examples": [{"state": "x", "answer": 1}]}}
    with client(server) as sdk:
        without = answers_of(sdk.system_one(state=SPEC_STATE, questions=bare))
        result = sdk.system_one(state=SPEC_STATE, questions=taught)
        assert set(answers_of(result)["team"]["probabilities"]) == {"billing", "tech"}
        assert answers_of(result) != without  # the examples reached the prompt
        with pytest.raises(TypeSafeUnprocessableEntityError) as info:
            sdk.system_one(state=SPEC_STATE, questions=wrong)
    assert info.value.body["detail"][0]["loc"] == ["body", "questions", "team", "x_examples", 0, "answer"]
