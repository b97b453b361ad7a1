"""SGLang's real router (`sglang-router` 0.3.2, the dev group) as a process on loopback, for the router tests.

`python -m sglang_router.launch_router --worker-urls ... --policy cache_aware` (or another policy),
with its health checks every second and one failure enough to take a worker out (the defaults are
60 s and three), a short shutdown grace, and its metrics port on loopback. `router_process` waits until every worker is
registered and healthy (`GET /readiness`), and stops the router (SIGTERM, then SIGKILL) on the way out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from openjev.listen import free_ports

ROUTER_VERSION = "0.3.2"


def require_router() -> None:
    """The router package is in the dev group (`uv sync`): its absence is a broken environment, not a skip."""
    if importlib.util.find_spec("sglang_router") is None:
        pytest.fail(f"sglang-router {ROUTER_VERSION} is not installed: run `uv sync` (it is in the dev group)")


def readiness(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(url + "/readiness", timeout=2) as response:
            body: dict[str, object] = json.loads(response.read())
            return body
    except urllib.error.HTTPError as error:
        body = json.loads(error.read() or b"{}")
        return body
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


@dataclass
class Router:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to the router's process group (the launcher's children too), then SIGKILL."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=10)
                if not group_alive(self.process.pid):
                    return
            except subprocess.TimeoutExpired:
                pass
            deadline = time.monotonic() + 5
            while group_alive(self.process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not group_alive(self.process.pid):
                return


def group_alive(pgid: int) -> bool:
    """Whether any process of the group `pgid` is still there (zombies aside)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def start_router(
    workers: Sequence[str], log: Path, *, port: int | None = None, wait: bool = True, policy: str = "cache_aware"
) -> Router:
    require_router()
    chosen, spare = free_ports(2)
    port = port or chosen
    metrics_port = spare if spare != port else chosen  # never the API port, even one the caller chose
    command = [
        sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
        "--worker-urls", *workers, "--policy", policy,
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
        "--health-check-interval-secs", "1", "--health-failure-threshold", "1", "--health-success-threshold", "1",
        "--shutdown-grace-period-secs", "1", "--log-level", "warn",
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    router = Router(f"http://127.0.0.1:{port}", port, process, log)
    if wait:
        deadline = time.monotonic() + 30
        while (readiness(router.url) or {}).get("healthy_workers") != len(workers):
            if process.poll() is not None or time.monotonic() > deadline:
                router.stop()
                raise AssertionError(f"the router did not become ready with {len(workers)} workers:\n{router.output()}")
            time.sleep(0.05)
    return router


@contextlib.contextmanager
def router_process(workers: Sequence[str], log: Path, *, policy: str = "cache_aware") -> Iterator[Router]:
    router = start_router(workers, log, policy=policy)
    try:
        yield router
    finally:
        router.stop()
