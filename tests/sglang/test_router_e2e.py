"""End to end behind SGLang's real router: `openjev serve --connect ROUTER`, and no other setting, over two
emulated workers.

Two emulator processes behind `python -m sglang_router.launch_router --policy cache_aware`
(sglang-router 0.3.2), and openjev as the real server process. Both contracts, requests of 1 to 12
questions, where each request's calls landed, a router stopped and started again, and a worker
killed while requests keep coming. Each test prints what it saw (run with `-s`).

Marked `integration`: the tokenizer is a fetched test asset (scripts/fetch-test-assets).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openjev.http.openapi_docs import DECISIONS_EXAMPLE, EXAMPLE_REQUEST
from openjev.listen import free_port
from tests.assets import qwen3_tokenizer_dir
from tests.sglang.launching import EMULATOR, OPENJEV, clean_env, health_status, http, wait_until
from tests.sglang.router import Router, readiness, start_router
from tests.sglang_emulation.generate_input import max_req_input_len
from tests.sglang_emulator import EmulatorConfig

pytestmark = [pytest.mark.integration, pytest.mark.needs_test_assets]

WORKER_CONTEXT = max_req_input_len(EmulatorConfig())  # what an emulated worker admits, read through the router
REQUEST_TIMEOUT = 5.0


@dataclass
class Worker:
    name: str
    url: str
    process: subprocess.Popen[str]

    def control(self, route: str, body: Any = None) -> Any:
        data = json.dumps(body or {}).encode() if route != "requests" else None
        method = "GET" if data is None else "POST"
        request = urllib.request.Request(f"{self.url}/_emulator/{route}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def generate_bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.control("requests")["requests"] if r["path"] == "/generate"]


@dataclass
class Stack:
    workers: list[Worker]
    router: Router
    api: str
    openjev: subprocess.Popen[bytes]
    log: Path

    def reset(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.control("reset")

    def served(self) -> list[int]:
        """How many /generate calls each worker got since the last reset (a dead worker: -1)."""
        return [len(w.generate_bodies()) if w.process.poll() is None else -1 for w in self.workers]


@contextlib.contextmanager
def worker_process(name: str) -> Iterator[Worker]:
    process = subprocess.Popen([sys.executable, str(EMULATOR), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("sglang-emulator listening on "), line
        yield Worker(name, line.split()[-1], process)
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("router-e2e")
    with worker_process("worker 1") as one, worker_process("worker 2") as two:
        router = start_router([one.url, two.url], folder / "router.log")
        port = free_port()
        env = clean_env({
            "OPENJEV_TOKENIZER": str(qwen3_tokenizer_dir()),
            "OPENJEV_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT),
        })  # fmt: skip
        log = folder / "serve.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(OPENJEV), "serve", "--connect", router.url, "--host", "127.0.0.1", "--port", str(port)],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        api = f"http://127.0.0.1:{port}"
        stack = None
        try:
            wait_until(lambda: health_status(api) == 200 or process.poll() is not None, 60, "openjev to be ready")
            assert process.poll() is None, log.read_text()
            stack = Stack([one, two], router, api, process, log)
            yield stack
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            (stack.router if stack is not None else router).stop()  # the one started last, if a test restarted it


def systemone(n: int, state: str = "I was charged twice. Please refund the duplicate.") -> dict[str, Any]:
    questions = {f"q{i}": {"type": "noul", "instructions": f"Is point {i} of the policy met?"} for i in range(n - 1)}
    questions["department"] = EXAMPLE_REQUEST["questions"]["department"]
    return {**EXAMPLE_REQUEST, "state": [{"role": "user", "content": state}], "questions": questions}


def decisions(n: int, state: str = "I was charged twice. Please refund the duplicate.") -> dict[str, Any]:
    questions = [{"type": "predicate", "name": f"q{i}", "instructions": f"Is point {i} met?"} for i in range(n - 1)]
    questions.append(DECISIONS_EXAMPLE["questions"][2])
    return {**DECISIONS_EXAMPLE, "input": state, "questions": questions}


def ask(stack: Stack, contract: str, body: dict[str, Any]) -> tuple[int, float, Any]:
    began = time.monotonic()
    status, _, reply = http("POST", f"{stack.api}/v1/{contract}", body, timeout=REQUEST_TIMEOUT + 5)
    return status, time.monotonic() - began, reply


def answers(reply: Any) -> int:
    return len(reply["answers"])  # an object by question name (System One), a list (Decisions)


def test_openjev_starts_behind_the_router_and_says_so(stack: Stack) -> None:
    """With no setting but the router's URL: the context length is what its workers say."""
    log = stack.log.read_text()
    assert '"peer": "router"' in log or "peer=router" in log, log
    assert "sglang_abort_unsupported" in log
    [said] = [json.loads(line) for line in log.splitlines() if "sglang_router_context" in line]
    assert said["context_tokens"] == WORKER_CONTEXT
    assert sorted(said["workers"]) == sorted(w.url for w in stack.workers)


@pytest.mark.parametrize("contract", ["systemone", "decisions"])
def test_requests_of_1_to_12_questions_are_answered_each_on_one_worker(stack: Stack, contract: str) -> None:
    seen = []
    for n in range(1, 13):
        stack.reset()
        body = systemone(n, f"Ticket {n} ({contract}): I was charged twice.") if contract == "systemone" else (
            decisions(n, f"Ticket {n} ({contract}): I was charged twice."))  # fmt: skip
        status, took, reply = ask(stack, contract, body)
        assert status == 200, reply
        assert answers(reply) == n
        served = stack.served()
        seen.append((n, served, round(took * 1000)))
        assert sorted(served) == [0, n + 1], seen  # the warm-up and every branch on one worker
    print(f"\n{contract}: (questions, /generate calls per worker, ms) {seen}")


def test_the_same_state_keeps_landing_on_one_worker(stack: Stack) -> None:
    holders: dict[str, set[int]] = {}
    for round_ in range(3):
        for state in ("Where is my parcel?", "My card was declined at checkout.", "Please close my account."):
            for contract, body in (("systemone", systemone(3, state)), ("decisions", decisions(3, state))):
                stack.reset()
                status, _, reply = ask(stack, contract, body)
                assert status == 200, reply
                served = stack.served()
                assert sorted(served) == [0, 4], served
                holders.setdefault(state, set()).add(served.index(4) + 1)
        assert round_ >= 0
    assert all(len(workers) == 1 for workers in holders.values()), holders
    print(f"\nstate -> the worker that served it, 3 rounds on both contracts: {holders}")


def test_a_router_stopped_then_started_again_is_met_with_503_then_served_without_restarting_openjev(
    stack: Stack,
) -> None:
    body = systemone(3)
    assert ask(stack, "systemone", body)[0] == 200
    stack.router.stop()
    down = [ask(stack, "systemone", body)[:2] for _ in range(3)]
    assert all(status == 503 for status, _ in down), down
    wait_until(lambda: health_status(stack.api) == 503, 10, "openjev's /health to say the backend is down")
    stack.router = start_router([w.url for w in stack.workers], stack.router.log, port=stack.router.port)
    wait_until(lambda: ask(stack, "systemone", body)[0] == 200, 15, "requests to be answered again")
    wait_until(lambda: health_status(stack.api) == 200, 10, "openjev's /health to recover")
    assert stack.openjev.poll() is None  # the same openjev process throughout
    print(f"\nrouter down: {[(s, round(t * 1000)) for s, t in down]} (status, ms); back up: 200 without a restart")


def test_a_worker_killed_mid_run_costs_requests_only_until_the_router_notices(stack: Stack) -> None:
    """Kill the worker that holds the state, keep asking: what the client sees, until it is answered again."""
    body = decisions(4, "A state the killed worker holds.")
    stack.reset()
    assert ask(stack, "decisions", body)[0] == 200
    holder = stack.served().index(5)
    victim = stack.workers[holder]
    victim.process.kill()
    victim.process.wait(timeout=5)
    killed = time.monotonic()
    seen: list[tuple[float, int, float]] = []
    while time.monotonic() - killed < 10:
        status, took, reply = ask(stack, "decisions", body)
        seen.append((round(time.monotonic() - killed, 2), status, round(took * 1000)))
        assert status in (200, 502, 503), reply
        if len(seen) >= 3 and all(s == 200 for _, s, _ in seen[-3:]):
            break
    assert [s for _, s, _ in seen[-3:]] == [200, 200, 200], seen
    failed = [entry for entry in seen if entry[1] != 200]
    recovered = next(t for t, s, _ in seen if s == 200)
    print(
        f"\n{victim.name} killed: {len(failed)} failed request(s) {failed}, answered again from {recovered} s "
        f"after the kill; every request (s after the kill, status, ms): {seen}; "
        f"router readiness now {readiness(stack.router.url)}"
    )
