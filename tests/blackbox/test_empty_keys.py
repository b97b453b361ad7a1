"""An empty key in the environment stops the real server at start-up: it never silently runs without one."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from openjev.listen import free_port
from tests.blackbox.conftest import clean_env, openjev_command


@pytest.mark.parametrize("variable", ["OPENJEV_API_KEY", "OPENJEV_BACKEND_API_KEY"])
@pytest.mark.parametrize("value", ["", " \n"])
def test_an_empty_key_stops_start_up_saying_how_to_run_without_one(variable: str, value: str) -> None:
    proc = subprocess.Popen(
        openjev_command("serve", "--backend", "fake", "--port", str(free_port())),
        env=clean_env({variable: value}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=60)
    finally:  # a server that started anyway (and its worker) is stopped, never left behind
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stderr = err.decode()
    assert proc.returncode == 2, stderr
    assert f"{variable} is set but empty" in stderr
    assert f"unset {variable}" in stderr
