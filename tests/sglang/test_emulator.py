"""The emulator itself behaves like SGLang 0.5.23 where openjev's correctness depends on it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.sglang_emulator import EmulatorConfig, SGLangEmulator, logprob_of

EMULATOR = Path(__file__).resolve().parents[1] / "sglang_emulator.py"


async def post(url: str, path: str, body: object, key: str | None = None) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as session, session.post(url + path, json=body, headers=headers) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


async def test_batched_input_ids_answer_in_order_with_per_item_rids(emulator: SGLangEmulator) -> None:
    prompts = [[1, 2, 3], [4, 5, 6, 7]]
    status, body = await post(
        emulator.url,
        "/generate",
        {"input_ids": prompts, "rid": "job", "return_logprob": True, "token_ids_logprob": [10, 11],
         "sampling_params": {"max_new_tokens": 1, "temperature": 0}},
    )  # fmt: skip
    assert status == 200
    assert isinstance(body, list)
    assert [item["meta_info"]["id"] for item in body] == ["job_0", "job_1"]
    for prompt, item in zip(prompts, body, strict=True):
        meta = item["meta_info"]
        assert meta["prompt_tokens"] == len(prompt)
        assert meta["output_token_ids_logprobs"] == [[[logprob_of(prompt, t), t, None] for t in (10, 11)]]


async def test_nested_token_ids_logprob_are_per_item(emulator: SGLangEmulator) -> None:
    status, body = await post(
        emulator.url, "/generate", {"input_ids": [[1, 2], [3, 4]], "return_logprob": True,
                                    "token_ids_logprob": [[7], [8, 9]]}
    )  # fmt: skip
    assert status == 200
    assert isinstance(body, list)
    assert [[e[1] for e in item["meta_info"]["output_token_ids_logprobs"][0]] for item in body] == [[7], [8, 9]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"input_ids": [1], "sampling_params": {"foo": 1}}, "unknown field `foo`"),
        ({"text": "hello"}, "send input_ids"),
        ({"input_ids": []}, "input_ids cannot be empty"),
        ({"input_ids": [1], "return_logprob": True, "token_ids_logprob": [-1]}, "out-of-vocabulary token id -1;"),
        ({"input_ids": list(range(40))}, "exceeds the maximum allowed length"),
    ],
)
async def test_requests_sglang_refuses_get_its_400(body: dict[str, object], message: str) -> None:
    emu = SGLangEmulator(EmulatorConfig(context_length=40))
    await emu.start()
    try:
        status, reply = await post(emu.url, "/generate", body)
    finally:
        await emu.stop()
    assert status == 400
    assert message in str(reply)


async def test_a_rid_still_in_flight_is_refused(emulator: SGLangEmulator) -> None:
    emulator.config.slow = 30.0
    first = asyncio.ensure_future(post(emulator.url, "/generate", {"input_ids": [1, 2], "rid": "r1"}))
    await emulator.wait_in_flight(1)
    status, reply = await post(emulator.url, "/generate", {"input_ids": [1, 2], "rid": "r1"})
    assert status == 400
    assert "Duplicate request ID detected: r1" in str(reply)
    await post(emulator.url, "/abort_request", {"rid": "r1"})
    status, reply = await first
    assert status == 200
    assert isinstance(reply, dict)
    assert reply["meta_info"]["finish_reason"]["type"] == "abort"


async def test_abort_matches_rids_by_prefix_like_sglang(emulator: SGLangEmulator) -> None:
    emulator.config.slow = 30.0
    batch = asyncio.ensure_future(post(emulator.url, "/generate", {"input_ids": [[1], [2]], "rid": "job1"}))
    other = asyncio.ensure_future(post(emulator.url, "/generate", {"input_ids": [3], "rid": "job2"}))
    assert await emulator.wait_in_flight(3) == {"job1_0", "job1_1", "job2"}
    await post(emulator.url, "/abort_request", {"rid": "job1"})
    _, aborted = await batch
    assert isinstance(aborted, list)
    assert [item["meta_info"]["finish_reason"]["type"] for item in aborted] == ["abort", "abort"]
    assert emulator.in_flight == {"job2"}
    await post(emulator.url, "/abort_request", {"rid": "job2"})
    await other


async def test_radix_cache_reports_the_seen_prefix_capped_one_short(emulator: SGLangEmulator) -> None:
    async def cached(ids: list[int]) -> int:
        _, reply = await post(emulator.url, "/generate", {"input_ids": ids})
        assert isinstance(reply, dict)
        return int(reply["meta_info"]["cached_tokens"])

    assert await cached([5, 6, 7, 8]) == 0
    assert await cached([5, 6, 7, 8, 9]) == 4
    assert await cached([5, 6, 7, 8]) == 3
    assert await cached([5, 6, 1]) == 2
    await post(emulator.url, "/flush_cache", {})
    assert await cached([5, 6, 7, 8]) == 0


async def test_api_key_guards_everything_but_health() -> None:
    emu = SGLangEmulator(EmulatorConfig(api_key="k"))
    await emu.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(emu.url + "/health") as r:
                assert r.status == 200
            for path in ("/model_info", "/server_info", "/v1/models"):
                async with session.get(emu.url + path) as r:
                    assert r.status == 401
        assert (await post(emu.url, "/generate", {"input_ids": [1]}))[0] == 401
        assert (await post(emu.url, "/generate", {"input_ids": [1]}, key="k"))[0] == 200
        assert (await post(emu.url, "/abort_request", {"rid": "x"}))[0] == 401
    finally:
        await emu.stop()


def test_the_emulator_runs_as_a_subprocess_with_its_flags() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(EMULATOR), "--port", "0", "--no-cached-tokens", "--api-key", "k"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sglang-emulator listening on http://127.0.0.1:")
        url = line.split()[-1]

        async def scenario() -> None:
            status, reply = await post(url, "/generate", {"input_ids": [1, 2, 3]}, key="k")
            assert status == 200
            assert isinstance(reply, dict)
            assert "cached_tokens" not in reply["meta_info"]
            async with aiohttp.ClientSession() as session:
                async with session.post(url + "/_emulator/config", json={"fail": 500}) as r:
                    assert r.status == 200
                async with session.get(url + "/_emulator/requests") as r:
                    recorded = await r.json()
            assert [q["path"] for q in recorded["requests"]] == ["/generate"]
            assert (await post(url, "/generate", {"input_ids": [1]}, key="k"))[0] == 500

        asyncio.run(scenario())
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


async def test_lora_adapters_are_listed_asked_by_name_and_change_the_answers() -> None:
    """As 0.5.23 serves `--lora-paths ticket=PATH`: listed after the model's card, `lora_path` names one, and a
    name it never loaded (or any, with LoRA off) is refused with its 400 words; the answers are the adapter's."""
    emu = SGLangEmulator(EmulatorConfig(lora_paths={"ticket": "/adapters/ticket"}))
    plain = SGLangEmulator(EmulatorConfig())
    await emu.start()
    await plain.start()
    ask = {"input_ids": [5, 6, 7], "return_logprob": True, "token_ids_logprob": [10, 11]}
    try:
        async with aiohttp.ClientSession() as session, session.get(emu.url + "/v1/models") as r:
            cards = (await r.json())["data"]
        status, reply = await post(emu.url, "/generate", {**ask, "lora_path": "ticket"})
        _, without = await post(emu.url, "/generate", ask)
        refusals = [
            await post(emu.url, "/generate", {**ask, "lora_path": "other"}),
            await post(plain.url, "/generate", {**ask, "lora_path": "ticket"}),
        ]
    finally:
        await emu.stop()
        await plain.stop()
    assert [(c["id"], c["root"], c["parent"]) for c in cards] == [
        ("emulated/model", "emulated/model", None),
        ("ticket", "/adapters/ticket", "emulated/model"),
    ]
    assert status == 200 and isinstance(reply, dict) and isinstance(without, dict)
    adapted = [entry[0] for entry in reply["meta_info"]["output_token_ids_logprobs"][0]]
    assert adapted == [logprob_of([5, 6, 7], t, adapter="ticket") for t in (10, 11)]
    assert adapted != [entry[0] for entry in without["meta_info"]["output_token_ids_logprobs"][0]]
    assert without["meta_info"]["cached_tokens"] == 0  # the adapter's cache is its own
    assert [status for status, _ in refusals] == [400, 400]
    never, disabled = (reply["error"]["message"] for _, reply in refusals)  # type: ignore[index]
    assert never == "Got LoRA adapter that has never been loaded: other\nAll loaded adapters: dict_keys(['ticket'])."
    assert disabled.startswith("LoRA adapter 'ticket' was requested, but LoRA is not enabled. Please launch the server")
