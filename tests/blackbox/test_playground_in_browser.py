"""The playground in a real headless Chromium against a real `openjev serve --backend fake` process.

Chromium is driven over the DevTools protocol (`cdp.py`): clicks and reads are script run in the
page, as a person's clicks would be handled. Every test ends by checking that each request the page
made went to the server under test (nothing else: no CDN, no font, no telemetry), that no script
threw and that the browser refused nothing under the page's policy. The fake backend's
probabilities are a hash of the prompt's tokens, so another state gives other numbers.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from openjev.contracts.decisions.openapi import DECISIONS_EXAMPLE
from openjev.http.playground import EXAMPLE
from tests.blackbox.cdp import Page, browser_page
from tests.blackbox.conftest import API_KEY, ServerProcess, clean_env

pytestmark = pytest.mark.needs_chromium

EXAMPLE_LABELS = {
    "refund": ["yes", "no"],
    "department": ["billing", "technical"],
    "urgency": ["Routine", "Urgent", "Emergency"],
}
READY = "document.getElementById('playground')?.dataset.ready === 'true'"
SETTLED = "['ok', 'error'].includes(document.getElementById('result').dataset.state)"
METERS = """[...document.querySelectorAll('#result meter')].map(m => ({
    question: m.closest('article').dataset.question, label: m.labels[0].textContent, value: m.value}))"""
# Sets an input's value as typing does: the page listens to `input` events.
TYPE = "(el, value) => { el.value = value; el.dispatchEvent(new Event('input', {bubbles: true})); }"


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    profile = tmp_path / "chromium"
    profile.mkdir()
    async with browser_page(profile) as opened:
        yield opened


async def open_playground(page: Page, server: ServerProcess) -> None:
    await page.open(server.url + "/playground")
    await page.wait_for(READY)


async def decide(page: Page) -> dict[str, Any]:
    """Click Decide and wait for the answer or the error: the result's state, status and text."""
    await page.evaluate("document.getElementById('decide').click()")
    await page.wait_for(SETTLED)
    result: dict[str, Any] = await page.evaluate(
        "(r => ({state: r.dataset.state, status: r.dataset.status, text: r.innerText}))"
        "(document.getElementById('result'))"
    )
    return result


async def meters(page: Page) -> dict[str, dict[str, float]]:
    """Question -> option label -> the probability its meter shows, in page order."""
    shown: dict[str, dict[str, float]] = {}
    for meter in await page.evaluate(METERS):
        shown.setdefault(meter["question"], {})[meter["label"]] = meter["value"]
    return shown


async def type_into(page: Page, element: str, value: str) -> None:
    await page.evaluate(f"({TYPE})({element}, {json.dumps(value)})")


async def choose_contract(page: Page, name: str) -> None:
    await page.evaluate(f"document.querySelector('input[name=contract][value={name}]').click()")


async def click_button(page: Page, text: str, within: str = "document") -> None:
    """Click the first button of `within` whose text is `text` (the editor redraws after each click)."""
    found = await page.evaluate(
        f"(b => b ? (b.click(), true) : false)([...{within}.querySelectorAll('button')]"
        f".find(b => b.textContent === {json.dumps(text)}))"
    )
    assert found, f"no button {text!r}"


def question(index: int) -> str:
    return f"document.querySelectorAll('#question-list fieldset.question')[{index}]"


async def snippet(page: Page, which: str) -> str:
    text: str = await page.evaluate(f"document.getElementById('snippet-{which}').textContent")
    return text


async def curl_body(page: Page) -> Any:
    """The body the curl snippet sends: what Decide sends too (both come from `requestBody`)."""
    quoted = (await snippet(page, "curl")).split(" -d '", 1)[1].removesuffix("'")
    return json.loads(quoted.replace("'\\''", "'"))


async def save_screenshot(page: Page, path: Path) -> None:
    await asyncio.to_thread(path.write_bytes, await page.screenshot())
    print(f"screenshot: {path}")


def check_offline(page: Page, server: ServerProcess) -> None:
    assert page.requests, "the page made no request at all"
    assert all(url.startswith(server.url + "/") for url in page.requests), page.requests
    assert page.errors == []


def check_example(shown: dict[str, dict[str, float]]) -> None:
    assert {q: list(options) for q, options in shown.items()} == EXAMPLE_LABELS
    for options in shown.values():
        assert all(0.0 <= p <= 1.0 for p in options.values())
        assert math.isclose(sum(options.values()), 1.0, abs_tol=1e-6)


async def test_the_example_decides_with_a_meter_per_option_and_follows_the_state(
    page: Page, server: ServerProcess, tmp_path: Path
) -> None:
    await open_playground(page, server)
    assert await page.evaluate("document.querySelector('label[for=state]').textContent") == "State"
    state = await page.evaluate("JSON.parse(document.getElementById('state').value)")
    assert state == [{"role": "user", "content": "I was charged twice. Please refund the duplicate."}]
    assert await page.evaluate("document.getElementById('api-key')") is None  # this server has no key
    assert await page.evaluate("document.querySelectorAll('#result meter').length") == 0

    result = await decide(page)
    assert (result["state"], result["status"]) == ("ok", "200"), result["text"]
    first = await meters(page)
    check_example(first)
    assert sum(len(options) for options in first.values()) == 7
    for shown in ("POST /v1/systemone", "Latency", "Input tokens", "Cached tokens", "Output tokens\n4"):
        assert shown in result["text"]
    await save_screenshot(page, tmp_path / "playground.png")

    await type_into(page, "document.getElementById('state')", "My laptop screen flickers since the last update.")
    assert "Read as plain text" in await page.evaluate("document.getElementById('state-reading').textContent")
    assert "flickers since the last update" in await snippet(page, "curl")
    assert (await decide(page))["state"] == "ok"
    second = await meters(page)
    check_example(second)
    assert second != first  # another prompt, other probabilities
    check_offline(page, server)


async def test_the_decisions_contract_gives_the_same_decision(page: Page, server: ServerProcess) -> None:
    await open_playground(page, server)
    assert (await decide(page))["state"] == "ok"
    system_one = await meters(page)

    await choose_contract(page, "decisions")
    assert "from openai import OpenAI" in await snippet(page, "python")
    assert f'OpenAI(base_url="{server.url}/v1"' in await snippet(page, "python")
    assert '"type": "predicate"' in await snippet(page, "curl")
    result = await decide(page)
    assert (result["state"], result["status"]) == ("ok", "200"), result["text"]
    assert "POST /v1/decisions" in result["text"] and "Cached tokens" in result["text"]
    decisions = await meters(page)
    check_example(decisions)
    for name, options in decisions.items():  # the same question about the same state: the same numbers
        assert options == pytest.approx(system_one[name], abs=1e-9)
    assert any(url.endswith("/v1/decisions") for url in page.requests)
    check_offline(page, server)


HI = [{"role": "user", "content": "Hi"}]
STATES: list[tuple[str, str, Any, Any]] = [  # (State text, read as, System One `state`, Decisions `input`)
    (json.dumps(HI), "transcript", HI, HI),
    (json.dumps({"messages": HI}), "transcript", {"messages": HI}, HI),
    ('{"order": 42, "paid": true}', "json", {"order": 42, "paid": True}, '{"order":42,"paid":true}'),
    ("Refund me, please.", "text", "Refund me, please.", "Refund me, please."),
    ('"quoted"', "text", '"quoted"', '"quoted"'),
    ("{not json", "text", "{not json", "{not json"),
]


async def test_the_form_becomes_each_contracts_request(page: Page, server: ServerProcess) -> None:
    """The example is the documented request on both wires; State is JSON when it parses to one, else text."""
    await open_playground(page, server)
    assert await curl_body(page) == EXAMPLE
    await choose_contract(page, "decisions")
    assert await curl_body(page) == {**DECISIONS_EXAMPLE, "input": EXAMPLE["state"]}
    for text, reading, state, input_ in STATES:
        await type_into(page, "document.getElementById('state')", text)
        assert await page.evaluate(f"window.PlaygroundWire.readState({json.dumps(text)}).kind") == reading, text
        for contract, field, expected in (("systemone", "state", state), ("decisions", "input", input_)):
            await choose_contract(page, contract)
            assert (await curl_body(page))[field] == expected, (text, contract)
            result = await decide(page)
            assert result["state"] == "ok", (text, contract, result["text"])
    check_offline(page, server)


async def test_questions_can_be_added_edited_and_removed(page: Page, server: ServerProcess) -> None:
    await open_playground(page, server)
    await click_button(page, "Remove question", question(0))  # refund
    await click_button(page, "Choice")
    await click_button(page, "Add option", question(2))
    await type_into(page, f"{question(2)}.querySelector('input.name')", "channel")
    await type_into(page, f"{question(2)}.querySelector('input.instructions')", "Where did the user write from?")
    for i, name in enumerate(["email", "phone", "chat"]):
        await type_into(page, f"{question(2)}.querySelectorAll('input[aria-label$=name]')[{i}]", name)
    await click_button(page, "Score")
    await click_button(page, "Remove level", question(3))
    await type_into(page, f"{question(3)}.querySelector('input.instructions')", "How upset is the user?")
    await click_button(page, "Yes/no")
    await page.evaluate(
        f"(s => {{ s.value = 'choice'; s.dispatchEvent(new Event('change')); }})({question(4)}.querySelector('select'))"
    )

    body = await curl_body(page)
    assert list(body["questions"]) == ["department", "urgency", "channel", "q4", "q5"]
    assert body["questions"]["channel"]["criteria"] == {"email": None, "phone": None, "chat": None}
    assert body["questions"]["q4"] == {
        "type": "score",
        "instructions": "How upset is the user?",
        "criteria": ["Medium", "High"],
    }
    result = await decide(page)
    assert result["state"] == "ok", result["text"]
    shown = await meters(page)
    assert {q: list(options) for q, options in shown.items()} == {
        "department": ["billing", "technical"],
        "urgency": ["Routine", "Urgent", "Emergency"],
        "channel": ["email", "phone", "chat"],
        "q4": ["Medium", "High"],
        "q5": ["yes", "no"],  # a yes/no question turned into a choice starts with two options
    }
    check_offline(page, server)


async def test_errors_are_shown_as_the_api_gives_them(page: Page, server: ServerProcess, tmp_path: Path) -> None:
    await open_playground(page, server)
    await click_button(page, "Remove option", question(1))  # a choice with one option is invalid
    result = await decide(page)
    assert (result["state"], result["status"]) == ("error", "422"), result["text"]
    assert "HTTP 422" in result["text"] and '"detail"' in result["text"] and "department" in result["text"]

    for _ in range(3):
        await click_button(page, "Remove question")
    await choose_contract(page, "decisions")
    result = await decide(page)
    assert (result["state"], result["status"]) == ("error", "400"), result["text"]
    assert '"invalid_request_error"' in result["text"] and '"param": "questions"' in result["text"]
    await save_screenshot(page, tmp_path / "playground-error.png")

    offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
    await page.send("Network.emulateNetworkConditions", **offline)
    result = await decide(page)
    assert (result["state"], result["status"]) == ("error", "network"), result["text"]
    assert "Network error" in result["text"] and "No answer from the server" in result["text"]
    check_offline(page, server)


async def test_a_keyed_server_gets_the_key_as_a_bearer_token(page: Page, keyed_server: ServerProcess) -> None:
    await open_playground(page, keyed_server)
    result = await decide(page)
    assert (result["state"], result["status"]) == ("error", "401"), result["text"]
    assert "authentication_error" in result["text"]

    await type_into(page, "document.getElementById('api-key')", API_KEY)
    result = await decide(page)
    assert (result["state"], result["status"]) == ("ok", "200"), result["text"]
    check_example(await meters(page))
    for which in ("curl", "python"):  # the snippets name the key's variable, never the key
        text = await snippet(page, which)
        assert "OPENJEV_API_KEY" in text and API_KEY not in text
    check_offline(page, keyed_server)


async def run(*command: str, env: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    return out.decode()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_the_snippets_run_as_shown(page: Page, keyed_server: ServerProcess) -> None:
    """The curl command and both SDK snippets, run as copied, get what the page showed."""
    env = clean_env({"OPENJEV_API_KEY": API_KEY, "PATH": os.environ.get("PATH", "")})
    await open_playground(page, keyed_server)
    await type_into(page, "document.getElementById('api-key')", API_KEY)
    for contract in ("systemone", "decisions"):
        await choose_contract(page, contract)
        assert (await decide(page))["state"] == "ok"
        shown = await meters(page)
        answered = json.loads(await run("bash", "-c", await snippet(page, "curl"), env=env))
        if contract == "systemone":
            assert answered["answers"]["department"]["probabilities"] == shown["department"]
        else:
            department = {p["value"]: p["probability"] for p in answered["answers"][1]["probabilities"]}
            assert department == shown["department"]
        printed = await run(sys.executable, "-c", await snippet(page, "python"), env=env)
        assert "refund" in printed and "department" in printed and "urgency" in printed
    check_offline(page, keyed_server)
