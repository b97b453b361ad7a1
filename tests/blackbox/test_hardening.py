"""Hostile clients and misconfiguration against the real server: clear 4xx or start-up errors, no stalls."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from backports import zstd

from openjev.listen import free_port
from tests.blackbox.conftest import (
    HOST,
    ServerPool,
    ServerProcess,
    clean_env,
    http_request,
    openjev_command,
    spec_request,
    wait_until,
)

LIVE_BUDGET_S = 0.1
HEAD = b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="session")
def strict_server(server_pool: ServerPool) -> ServerProcess:
    """A 2 s deadline for reading a body."""
    return server_pool.get("strict", OPENJEV_BODY_TIMEOUT="2")


def raw_exchange(port: int, data: bytes, *, half_close: bool = False, timeout: float = 10.0) -> bytes:
    """Send raw bytes on one connection and read until the server closes it (or `timeout`)."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer and half_close is False and b"connection: close" not in answer.lower():
                    head, _, body = answer.partition(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":")[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        None,
                    )
                    if length is not None and len(body) >= length:
                        break
        except TimeoutError:
            pass
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


class LivenessProbe:
    """Polls /health/live in a thread and keeps the slowest answer."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            reply = http_request(self.server.url, "GET", "/health/live", timeout=10)
            assert reply.status == 200
            self.latencies.append(reply.elapsed)
            time.sleep(0.02)

    def __enter__(self) -> LivenessProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(15)

    @property
    def worst(self) -> float:
        return max(self.latencies)


@pytest.mark.parametrize(
    "request_bytes",
    [
        HEAD + b"Transfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n",  # not a chunk size
        HEAD + b'Content-Length: 100\r\n\r\n{"model"',  # fewer bytes than announced
    ],
    ids=["malformed-chunked", "short-content-length"],
)
def test_a_body_that_ends_early_is_400(strict_server: ServerProcess, request_bytes: bytes) -> None:
    answer = raw_exchange(strict_server.port, request_bytes, half_close=True)
    assert status_of(answer) == 400, answer[:300]
    assert b'"bad_request"' in answer


def test_a_trickled_body_is_408_and_the_server_keeps_answering(strict_server: ServerProcess) -> None:
    results: list[bytes] = []

    def trickle() -> None:
        with socket.create_connection((HOST, strict_server.port), timeout=15) as sock:
            sock.sendall(HEAD + b"Content-Length: 1000\r\n\r\n")
            try:
                for _ in range(20):
                    sock.sendall(b" ")
                    time.sleep(0.5)
            except OSError:
                pass  # the server answered and closed
            try:
                results.append(sock.recv(65536))
            except OSError:
                results.append(b"")

    started = time.monotonic()
    clients = [threading.Thread(target=trickle) for _ in range(20)]
    with LivenessProbe(strict_server) as probe:
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(30)
    assert all(status_of(answer) == 408 for answer in results), [a[:80] for a in results]
    assert time.monotonic() - started < 8
    assert probe.worst < LIVE_BUDGET_S, f"/health/live took {probe.worst * 1000:.0f} ms during the trickle"


def test_many_tiny_zstd_frames_are_refused_at_once_without_stalling(strict_server: ServerProcess) -> None:
    frames = zstd.compress(b"") * 200_000  # ~1.8 MB of empty frames
    headers = {"Content-Type": "application/json", "Content-Encoding": "zstd"}
    with LivenessProbe(strict_server) as probe:
        time.sleep(0.05)
        reply = http_request(strict_server.url, "POST", "/v1/systemone", frames, headers)
        time.sleep(0.05)
    assert 400 <= reply.status < 500 and reply.elapsed < 1.0, (reply.status, reply.elapsed)
    assert probe.worst < LIVE_BUDGET_S


def test_json_only_and_loopback_host_only(strict_server: ServerProcess) -> None:
    body = json.dumps(spec_request()).encode()
    plain = http_request(strict_server.url, "POST", "/v1/systemone", body, {"Content-Type": "text/plain"})
    assert plain.status == 415 and "Content-Type: application/json" in plain.json()["detail"]["message"]
    rebound = http_request(
        strict_server.url, "POST", "/v1/systemone", body, {"Content-Type": "application/json", "Host": "evil.example"}
    )
    assert rebound.status == 400 and rebound.json()["detail"]["error_type"] == "invalid_host"


def test_a_second_server_on_a_taken_port_stops_at_start_up(strict_server: ServerProcess, tmp_path: Path) -> None:
    second = subprocess.run(
        openjev_command("serve", "--backend", "fake", "--port", str(strict_server.port)),
        env=clean_env(),
        capture_output=True,
        timeout=60,
    )
    assert second.returncode == 2
    assert f"address in use: port {strict_server.port}".encode() in second.stderr
    assert strict_server.is_healthy()


def test_a_host_name_is_accepted(tmp_path: Path) -> None:
    port = free_port()
    with (tmp_path / "err.log").open("wb") as err:
        proc = subprocess.Popen(
            openjev_command("serve", "--backend", "fake", "--port", str(port)),
            env=clean_env({"OPENJEV_HOST": "localhost"}),
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:

        def healthy() -> bool:
            if proc.poll() is not None:
                return True
            try:  # "localhost" tries each of its addresses
                return http_request(f"http://localhost:{port}", "GET", "/health", timeout=2).status == 200
            except OSError:
                return False

        assert wait_until(healthy, 30)
        assert proc.poll() is None, (tmp_path / "err.log").read_text()
    finally:
        proc.terminate()
        proc.wait(15)
