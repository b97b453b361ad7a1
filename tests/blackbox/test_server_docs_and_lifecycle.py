"""The real `openjev serve` process: its docs pages and schema, bad settings at start-up, signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from openjev.listen import free_port
from tests.blackbox.conftest import (
    SPEC_QUESTIONS,
    Reply,
    ServerProcess,
    clean_env,
    http_request,
    openjev_command,
    post_json,
    spec_request,
    wait_until,
)

TIMING_ENTRY = re.compile(r'^\s*([A-Za-z0-9_-]+);dur=([0-9.]+)(?:;desc="[^"]*")?\s*$')


# --------------------------------------------------------------------------------------------
# Docs and schema


def page_assets(server: ServerProcess, path: str) -> tuple[str, dict[str, Reply]]:
    """A docs page and every script and stylesheet it references, fetched from the server itself."""
    reply = http_request(server.url, "GET", path)
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in reply.headers["content-security-policy"]
    html = reply.body.decode()
    references = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert all(ref.startswith("/docs/assets/") for ref in references), references
    return html, {ref: http_request(server.url, "GET", ref) for ref in references}


def test_scalar_reference_at_root(server: ServerProcess) -> None:
    html, assets = page_assets(server, "/")
    assert 'data-url="/openapi.json"' in html
    [(name, script)] = assets.items()
    assert re.fullmatch(r"/docs/assets/scalar-\d+\.\d+\.\d+\.js", name), "Scalar version is not pinned"
    assert script.status == 200 and script.headers["content-type"].startswith("text/javascript")
    assert b"@scalar/api-reference" in script.body


def test_swagger_at_docs(server: ServerProcess) -> None:
    _, assets = page_assets(server, "/docs")
    names = sorted(assets)
    assert any(re.fullmatch(r"/docs/assets/swagger-ui-\d+\.\d+\.\d+\.js", n) for n in names), names
    assert all(reply.status == 200 for reply in assets.values())
    init = next(reply.body.decode() for name, reply in assets.items() if "swagger-init" in name)
    assert "SwaggerUIBundle" in init and "/openapi.json" in init


def check_openapi(document: dict[str, Any]) -> dict[str, Any]:
    operation = document["paths"]["/v1/systemone"]["post"]
    schema = document["components"]["schemas"]["SystemOneRequest"]
    assert {"model", "state", "questions"} <= set(schema["properties"])
    content = operation["requestBody"]["content"]["application/json"]
    assert content["schema"]["$ref"].endswith("/SystemOneRequest")
    examples = [e["value"] for e in content.get("examples", {}).values()]
    example: dict[str, Any] = next(e for e in examples if e.get("questions", {}).keys() == SPEC_QUESTIONS.keys())
    return example


def test_openapi_has_the_request_schema_and_a_working_example(server: ServerProcess) -> None:
    reply = http_request(server.url, "GET", "/openapi.json")
    assert reply.status == 200
    example = check_openapi(reply.json())
    assert example == spec_request()
    # The editable example is a request that works as is.
    answered = post_json(server.url, example)
    assert answered.status == 200
    assert set(answered.json()["answers"]) == set(SPEC_QUESTIONS)


def test_schema_command_needs_no_model(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("openjev")  # what `uv run openjev` runs
    command = [str(script), "schema"] if script.exists() else openjev_command("schema")
    env = clean_env(
        {
            "OPENJEV_BACKEND": "embedded",
            "OPENJEV_MODEL": str(tmp_path / "missing.gguf"),
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf"),
        }
    )
    done = subprocess.run(command, env=env, capture_output=True, timeout=60, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(done.stdout)
    check_openapi(document)
    assert "/v1/models" in document["paths"]
    assert not (tmp_path / "hf").exists()


# --------------------------------------------------------------------------------------------
# Process life: bad settings, SIGTERM


BAD_SETTINGS = [
    ("OPENJEV_MAX_OPTIONS", "999"),
    ("OPENJEV_TEMPERATURE", "abc"),
    ("OPENJEV_REQUEST_TIMEOUT", "-1"),
    ("OPENJEV_MAX_CONCURRENT_REQUESTS", "0"),
    ("OPENJEV_CONFIDENCE", "vibes"),
    ("OPENJEV_NO_SUCH_SETTING", "1"),
]


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS, ids=[n for n, _ in BAD_SETTINGS])
def test_bad_setting_stops_start_up_naming_the_variable(name: str, value: str) -> None:
    port = free_port()
    done = subprocess.run(
        openjev_command("serve", "--backend", "fake", "--port", str(port)),
        env=clean_env({name: value}),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert name in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()


def test_sigterm_stops_the_server_with_exit_code_0(fresh_server: Callable[..., ServerProcess]) -> None:
    server = fresh_server(OPENJEV_FAKE_LATENCY="0.5")  # an evaluation takes 1 s (warm-up + branches)
    assert post_json(server.url, spec_request()).status == 200
    assert server.proc is not None
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(post_json, server.url, spec_request(state="in flight at shutdown"))
        # Nothing observable marks "request received" before it ends, so give it a head start.
        time.sleep(0.3)
        server.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = server.proc.wait(15)
        reply = in_flight.result(15)
    assert code == 0, server.output()
    assert time.monotonic() - started < 10
    assert reply.status == 200, "the in-flight request was cut by a graceful shutdown"
    with pytest.raises(OSError):
        http_request(server.url, "GET", "/health", timeout=2)


def test_sigterm_to_the_server_and_its_worker_stops_both_within_the_shutdown_timeout(
    fresh_server: Callable[..., ServerProcess],
) -> None:
    """A worker that cannot finish its in-flight work is killed after OPENJEV_SHUTDOWN_TIMEOUT.

    Granian's default is to wait for it forever, the port already closed: the server once stayed
    alive 17 minutes after SIGTERM reached it, its worker and `uv` at once.
    """
    server = fresh_server(OPENJEV_FAKE_LATENCY="600", OPENJEV_REQUEST_TIMEOUT="900", OPENJEV_SHUTDOWN_TIMEOUT="2")
    assert server.proc is not None
    workers = server.worker_pids()
    assert workers
    with ThreadPoolExecutor(1) as pool:
        pool.submit(post_json, server.url, spec_request(state="stuck at shutdown"), timeout=60)

        def in_flight() -> bool:
            metrics = http_request(server.url, "GET", "/metrics", timeout=5).body.decode()
            return "openjev_evaluations_running 1.0" in metrics

        assert wait_until(in_flight, 15)
        for pid in (server.pid, *workers):
            os.kill(pid, signal.SIGTERM)
        code = server.proc.wait(30)  # the in-flight call alone would last 600 s
    assert code == 0, server.output()
    assert wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), 10)
    assert "refused to gracefully stop" in server.output()
