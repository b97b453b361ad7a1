"""Helpers to run `openjev serve` (and the emulator) as real processes on loopback for the SGLang tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.listen import free_ports

TESTS = Path(__file__).resolve().parents[1]
STANDIN = Path(__file__).with_name("standin_sglang.py")
EMULATOR = TESTS / "sglang_emulator.py"
OPENJEV = Path(sys.executable).with_name("openjev")


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJEV_", "STANDIN_", "SGLANG_"))}
    return {**env, **extra}


def wait_until(condition: Any, timeout: float, what: str) -> Any:
    """Poll a condition on another process (files, sockets) until it holds; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def http(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, dict[str, str], Any]:
    """(status, headers, decoded JSON or text); (0, {}, None) when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw, status, headers = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        raw, status, headers = error.read(), error.code, dict(error.headers)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}, None
    try:
        return status, {k.lower(): v for k, v in headers.items()}, json.loads(raw)
    except ValueError:
        return status, {k.lower(): v for k, v in headers.items()}, raw.decode(errors="replace")


def health_status(url: str) -> int:
    return http("GET", url + "/health", timeout=5)[0]


def make_standin_python(folder: Path) -> Path:
    """An executable that behaves like an SGLang environment's `python` (see standin_sglang.py)."""
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    record: Path
    python: Path
    sglang_port: int

    def recorded(self, timeout: float = 20.0) -> dict[str, Any]:
        """What the stand-in SGLang recorded once started (argv, pid, SGLANG_RUST_SERVER, SGLANG_WARMUP_TIMEOUT)."""
        wait_until(lambda: self.record.is_file() and self.record.read_text(), timeout, "SGLang to be launched")
        data: dict[str, Any] = json.loads(self.record.read_text())
        return data

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_exit(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)


@contextlib.contextmanager
def serve_with_standin(
    tmp_path: Path, env: Mapping[str, str] | None = None, args: Sequence[str] = ()
) -> Iterator[Served]:
    """`openjev serve --backend sglang --sglang-python STANDIN` in its own session; cleaned up after."""
    python = make_standin_python(tmp_path)
    record = tmp_path / "sglang.json"
    api_port, sglang_port = free_ports(2)
    log = tmp_path / "serve.log"
    full_env = clean_env({"OPENJEV_SGLANG_PORT": str(sglang_port), "STANDIN_RECORD": str(record), **(env or {})})
    command = [str(OPENJEV), "serve", "--backend", "sglang", "--sglang-python", str(python),
               "--host", "127.0.0.1", "--port", str(api_port), *args]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(process, f"http://127.0.0.1:{api_port}", log, record, python, sglang_port)
    try:
        yield served
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if record.is_file():
            with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
                os.kill(int(json.loads(record.read_text())["pid"]), signal.SIGKILL)


def process_gone(pid: int) -> bool:
    """True once `pid` no longer exists (or is a zombie nobody will run again)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@contextlib.contextmanager
def emulator_process(*flags: str, port: int = 0) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`python tests/sglang_emulator.py --port PORT FLAGS`; yields (url, process)."""
    process = subprocess.Popen(
        [sys.executable, str(EMULATOR), "--port", str(port), *flags], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("sglang-emulator listening on "), line
        yield line.split()[-1], process
    finally:
        process.terminate()
        process.wait(timeout=10)
