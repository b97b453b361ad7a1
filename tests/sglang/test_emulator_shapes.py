"""The emulator answers in the shapes SGLang 0.5.23 answered (tests/data/sglang-0.5.23-replies.json).

Each recorded exchange is sent to the emulator as it was sent to SGLang, and the reply's shape is
compared with the recorded one: the keys, in the order written (`exact`: the same keys; `subset`:
the recorded ones, among others), and the type of every value; bodies of the health and abort
routes empty; the 400 messages word for word. The last exchange takes the emulator down, as an
out-of-vocabulary prompt id took SGLang down.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.sglang_emulator import EmulatorConfig, SGLangEmulator

RECORD = json.loads((Path(__file__).parents[1] / "data" / "sglang-0.5.23-replies.json").read_text(encoding="utf-8"))
EXCHANGES = {exchange["name"]: exchange for exchange in RECORD["exchanges"]}


def shape(value: Any) -> Any:
    """Keys in order and value types, all the way down (an int where a float was seen is a float's place too)."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [shape(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return type(value).__name__
    return "number"


def subset_shape(recorded: Any, answered: Any, where: str = "$", *, ordered: bool = True) -> None:
    """The recorded keys are there (in the recorded order unless not `ordered`), each value of the recorded shape."""
    if isinstance(recorded, dict):
        assert isinstance(answered, dict), where
        keys = [key for key in answered if key in recorded]
        assert keys == list(recorded) if ordered else sorted(keys) == sorted(recorded), f"{where}: {keys}"
        for key, item in recorded.items():
            subset_shape(item, answered[key], f"{where}.{key}")
    else:
        assert shape(answered) == shape(recorded), f"{where}: {answered!r} is not shaped like {recorded!r}"


async def send(url: str, exchange: dict[str, Any]) -> tuple[int, str]:
    request = exchange["request"]
    async with (
        aiohttp.ClientSession() as session,
        session.request(request["method"], url + request["path"], json=request.get("body")) as response,
    ):
        return response.status, await response.text()


@pytest.fixture
async def emulator() -> Any:
    emu = SGLangEmulator(EmulatorConfig(vocab_size=RECORD["vocab_size"], context_length=4096))
    await emu.start()
    yield emu
    await emu.stop()


def test_the_record_covers_what_the_issue_names() -> None:
    named = {"generate_scoring", "generate_batch", "generate_aborted", "health", "health_generate", "abort_request"}
    named |= {"token_ids_logprob_out_of_vocabulary", "empty_input_ids", "input_ids_out_of_vocabulary"}
    assert named <= set(EXCHANGES)


@pytest.mark.parametrize("name", [e["name"] for e in RECORD["exchanges"] if e.get("status")])
async def test_the_emulator_answers_in_the_recorded_shape(emulator: SGLangEmulator, name: str) -> None:
    exchange = EXCHANGES[name]
    if name == "generate_scoring":  # answered after a warm-up of its first 200 ids, as recorded
        await send(emulator.url, EXCHANGES["generate_warm_up"])
    if exchange.get("aborted_while_running"):
        emulator.config.slow = 30.0
        rid = exchange["request"]["body"]["rid"]
        running = asyncio.ensure_future(send(emulator.url, exchange))
        await emulator.wait_in_flight(1)
        await send(emulator.url, EXCHANGES["abort_request"])
        status, text = await running
    else:
        status, text = await send(emulator.url, exchange)
        rid = None
    assert status == exchange["status"], text
    if "text" in exchange:
        assert text == exchange["text"]
    if "text_starts_with" in exchange:
        assert text.startswith(exchange["text_starts_with"])
    if "json" in exchange:
        answered = json.loads(text)
        if exchange["compare"] == "exact":
            assert shape(answered) == shape(exchange["json"])
            if status != 200:
                assert answered == exchange["json"]  # SGLang's own words
        else:
            subset_shape(exchange["json"], answered, ordered=not exchange.get("unordered"))
    if rid is not None:
        assert json.loads(text)["meta_info"]["finish_reason"] == exchange["json"]["meta_info"]["finish_reason"]


async def test_the_recorded_cache_counts(emulator: SGLangEmulator) -> None:
    async def cached(name: str) -> int:
        _, text = await send(emulator.url, EXCHANGES[name])
        return int(json.loads(text)["meta_info"]["cached_tokens"])

    assert await cached("generate_warm_up") == 0  # first warm-up
    assert await cached("generate_scoring") == 200  # the next call on the same prefix
    assert await cached("generate_scoring") == 202  # an exact repeat: prompt_tokens - 1
    await send(emulator.url, EXCHANGES["flush_cache"])
    assert await cached("generate_warm_up") == 0


async def test_an_out_of_vocabulary_prompt_id_takes_the_emulator_down_as_it_took_sglang(
    emulator: SGLangEmulator,
) -> None:
    exchange = EXCHANGES["input_ids_out_of_vocabulary"]
    with pytest.raises(aiohttp.ClientError):
        await send(emulator.url, exchange)
    assert emulator.crashed == exchange["server_exits"]
    await asyncio.sleep(0.1)
    with pytest.raises(aiohttp.ClientError):  # nothing listens any more
        await send(emulator.url, EXCHANGES["health"])
