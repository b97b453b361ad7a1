"""Start real `openjev serve` processes on loopback for the smoke tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from openjev.listen import free_port

OPENJEV = Path(sys.executable).with_name("openjev")


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without any OPENJEV_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
    return {**env, **extra}


@contextmanager
def openjev_server(
    *args: str, env: Mapping[str, str] | None = None, log: Path | None = None, port: int | None = None
) -> Iterator[str]:
    """`openjev serve ARGS --port P` in its own process group; yields its URL, stops it after."""
    port = port or free_port()
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(OPENJEV), "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
        env=clean_env(env or {}),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if log:
            out.close()  # type: ignore[union-attr]


def wait_ready(url: str, timeout: float = 30.0) -> None:
    """Until GET /health answers 200 (the server process listens and its backend is up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):  # busy loading the model
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server at {url} did not become ready within {timeout:g} s")
        time.sleep(0.1)
