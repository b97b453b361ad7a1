"""Black-box fixtures: the real `openjev serve --backend fake` process, on a free loopback port.

Each server is started once per set of settings (session scope) and shared by every test that
needs those settings. Tests isolate their log assertions with `server.log_mark()` and
`server.logs_since(mark)`: stderr (JSON lines) is appended to one file per server.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.listen import free_port

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")
API_KEY = "blackbox-secret-key-0123456789"

# The example of docs/spec.md#the-request, as sent on the wire.
SPEC_STATE: list[dict[str, str]] = EXAMPLE_REQUEST["state"]
SPEC_QUESTIONS: dict[str, Any] = EXAMPLE_REQUEST["questions"]


def spec_request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "jev-latest", "state": SPEC_STATE, "questions": SPEC_QUESTIONS}
    body.update(overrides)
    return body


def error_type(reply: Reply) -> str:
    """A System One error reply's `detail.error_type`."""
    detail = reply.json()["detail"]
    assert isinstance(detail, dict), detail
    value: str = detail["error_type"]
    return value


def noul_questions(n: int) -> dict[str, Any]:
    return {f"q{i}": {"type": "noul", "instructions": f"Is statement {i} true?"} for i in range(n)}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any OPENJEV_* / TYPESAFE_* leaking in, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJEV_", "TYPESAFE_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def openjev_command(*args: str) -> list[str]:
    """`python -m openjev.cli ...` with this interpreter (no `uv run` start-up cost)."""
    return [sys.executable, "-m", "openjev.cli", *args]


# --------------------------------------------------------------------------------------------
# Plain HTTP, curl-like (stdlib only, so nothing in between rewrites headers or bodies).


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes
    elapsed: float

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def request_id(self) -> str | None:
        return self.headers.get("x-typesafe-request-id")


def http_request(
    base: str,
    method: str,
    path: str,
    body: bytes | Iterator[bytes] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Reply:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    started = time.perf_counter()
    try:
        hdrs = dict(headers or {})
        try:
            if body is not None and not isinstance(body, bytes | bytearray):
                hdrs.setdefault("Transfer-Encoding", "chunked")
                conn.request(method, path, body=body, headers=hdrs, encode_chunked=True)
            else:
                conn.request(method, path, body=body, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            # The server answered (e.g. 413) and closed before the whole body was sent, as curl
            # sees it too: the answer is still there to read.
            pass
        response = conn.getresponse()
        data = response.read()
        return Reply(
            status=response.status,
            headers={k.lower(): v for k, v in response.getheaders()},
            body=data,
            elapsed=time.perf_counter() - started,
        )
    finally:
        conn.close()


def post_json(
    base: str,
    payload: Any,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    path: str = "/v1/systemone",
) -> Reply:
    return http_request(
        base,
        "POST",
        path,
        json.dumps(payload).encode(),
        {"Content-Type": "application/json", **(headers or {})},
        timeout,
    )


# --------------------------------------------------------------------------------------------
# The server process.


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.02) -> Any:
    """Poll `predicate` until it returns something truthy; None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


@dataclass
class ServerProcess:
    """One `openjev serve --backend fake` process with its own settings, port and log files."""

    env: dict[str, str]
    log_dir: Path
    name: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"{self.name}.stderr.log"

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"{self.name}.stdout.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> ServerProcess:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                openjev_command("serve", "--backend", "fake", "--host", HOST, "--port", str(self.port)),
                env=clean_env(self.env),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: the Granian worker goes with it
            )
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"server {self.name} exited with {self.proc.returncode} before ready:\n{self.output()}")
            try:
                reply = http_request(self.url, "GET", "/health", timeout=2)
                if reply.status == 200:
                    return
                last = f"{reply.status} {reply.body[:200]!r}"
            except OSError as exc:
                last = repr(exc)
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"server {self.name} not ready within {timeout} s (last: {last}):\n{self.output()}")

    def is_healthy(self) -> bool:
        try:
            return http_request(self.url, "GET", "/health", timeout=5).status == 200
        except OSError:
            return False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL to the process group if it does not stop in time. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # Stuck: end the process group we created (the main process and its Granian worker).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        return proc.returncode

    # Logs ---------------------------------------------------------------------------------

    def log_mark(self) -> int:
        return self.stderr_path.stat().st_size

    def logs_since(self, mark: int = 0) -> str:
        with self.stderr_path.open("rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", errors="replace")

    def output(self) -> str:
        out = self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""
        err = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return f"--- stdout ---\n{out[-4000:]}\n--- stderr ---\n{err[-4000:]}"

    def events_since(self, mark: int = 0) -> list[dict[str, Any]]:
        events = []
        for line in self.logs_since(mark).splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    events.append(record)
        return events

    def wait_for_event(self, event: str, mark: int, timeout: float = 10.0) -> dict[str, Any] | None:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events_since(mark) if e.get("event") == event), None)

        result: dict[str, Any] | None = wait_until(found, timeout)
        return result

    def worker_pids(self) -> list[int]:
        """Child processes of the server (Granian's worker), read from /proc."""
        children: list[int] = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'.
                ppid = int(stat.read_text().rpartition(")")[2].split()[1])
                if ppid == self.pid:
                    children.append(int(stat.parent.name))
        return children


class ServerPool:
    """Starts one server per distinct settings, lazily, and stops them all at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[tuple[tuple[str, str], ...], ServerProcess] = {}

    def get(self, name: str, **env: str) -> ServerProcess:
        key = tuple(sorted(env.items()))
        server = self._servers.get(key)
        if server is None or server.proc is None or server.proc.poll() is not None:
            server = ServerProcess(env=dict(env), log_dir=self.log_dir, name=name).start()
            self._servers[key] = server
        return server

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("openjev-servers"))
    yield pool
    pool.stop_all()


@pytest.fixture(scope="session")
def server(server_pool: ServerPool) -> ServerProcess:
    """Default settings (debug logging, so that even debug output is checked for leaks)."""
    return server_pool.get("default", OPENJEV_LOG_LEVEL="debug")


@pytest.fixture(scope="session")
def keyed_server(server_pool: ServerPool) -> ServerProcess:
    return server_pool.get("keyed", OPENJEV_API_KEY=API_KEY)


@pytest.fixture(scope="session")
def slow_server(server_pool: ServerPool) -> ServerProcess:
    """Two evaluations at a time, each backend call 0.5 s: for bursts (529) and client disconnects."""
    return server_pool.get("slow", OPENJEV_MAX_CONCURRENT_REQUESTS="2", OPENJEV_FAKE_LATENCY="0.5")


@pytest.fixture(scope="session")
def timeout_server(server_pool: ServerPool) -> ServerProcess:
    """Backend calls take 1 s, the request deadline is 0.3 s: every evaluation times out."""
    return server_pool.get(
        "timeout", OPENJEV_REQUEST_TIMEOUT="0.3", OPENJEV_FAKE_LATENCY="1", OPENJEV_LOG_LEVEL="debug"
    )


@pytest.fixture(scope="session")
def tuned_server(server_pool: ServerPool) -> ServerProcess:
    """Non-default answer settings: temperature 2, TypeSafe's confidence, 100 options, 3 questions."""
    return server_pool.get(
        "tuned",
        OPENJEV_TEMPERATURE="2",
        OPENJEV_CONFIDENCE="typesafe",
        OPENJEV_MAX_OPTIONS="100",
        OPENJEV_MAX_QUESTIONS="3",
    )


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """A server owned by one test (for tests that stop it)."""
    started: list[ServerProcess] = []

    def start(**env: str) -> ServerProcess:
        server = ServerProcess(env=dict(env), log_dir=tmp_path, name=f"fresh{len(started)}")
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
