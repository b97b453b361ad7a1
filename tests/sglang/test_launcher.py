"""`openjev serve` launching and supervising SGLang, with a stand-in SGLang Python (no GPU)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openjev.listen import free_port
from openjev.settings import SGLANG_DEFAULT_REVISION
from tests.assets import qwen3_tokenizer_dir
from tests.sglang.launching import (
    clean_env,
    health_status,
    http,
    make_standin_python,
    process_gone,
    serve_with_standin,
    wait_until,
)
from tests.sglang_emulator import logprob_of

LOADING = {"STANDIN_LOAD_SECONDS": "600"}  # SGLang "loading" for the whole test: the API stays at 503


def expected_argv(port: int, *extra: str, deterministic: tuple[str, ...] = ()) -> list[str]:
    return [
        "-m", "sglang.launch_server",
        "--model-path", "nvidia/Qwen3.6-35B-A3B-NVFP4",
        "--revision", SGLANG_DEFAULT_REVISION,
        "--served-model-name", "Qwen/Qwen3.6-35B-A3B",
        "--host", "127.0.0.1", "--port", str(port),
        *extra,
        "--kv-cache-dtype", "bf16",
        "--mamba-radix-cache-strategy", "extra_buffer",
        *deterministic,
        "--log-level", "info",
    ]  # fmt: skip


def test_default_launch_command_gates_readiness_and_sigterm_stops_both(tmp_path: Path) -> None:
    with serve_with_standin(tmp_path, LOADING) as served:
        recorded = served.recorded()
        assert recorded["argv"] == expected_argv(served.sglang_port)
        assert recorded["SGLANG_RUST_SERVER"] == "0"  # the Python frontend is the default
        # The API is up at once and says 503 while SGLang loads.
        assert wait_until(lambda: health_status(served.url), 30, "the API to listen") == 503
        question = {"q": {"type": "noul", "instructions": "Is it?"}}
        status, headers, body = http(
            "POST", served.url + "/v1/systemone", {"model": "jev-latest", "state": "x", "questions": question}
        )
        assert status == 503
        assert body["detail"]["error_type"] == "not_ready"
        assert "retry-after" in headers
        served.process.send_signal(signal.SIGTERM)
        assert served.wait_exit(15) == 0
        stopped = served.record.with_name(served.record.name + ".stopped")
        assert stopped.read_text() == "SIGTERM"  # SGLang got a graceful SIGTERM
        assert process_gone(recorded["pid"])
        assert "standin: loading weights" in served.output()  # SGLang's output is relayed


def test_python_frontend_profile_backend_key_and_deterministic_inference(tmp_path: Path) -> None:
    env = {
        **LOADING,
        "OPENJEV_FRONTEND": "python",
        "OPENJEV_PROFILE": "b200-nvfp4",
        "OPENJEV_BACKEND_API_KEY": "backend-s3cret",
        "OPENJEV_STARTUP_TIMEOUT": "900",
        "OPENJEV_DETERMINISTIC": "true",
    }
    deterministic = (
        "--enable-deterministic-inference", "--attention-backend", "triton", "--linear-attn-prefill-backend", "triton",
    )  # fmt: skip
    with serve_with_standin(tmp_path, env) as served:
        recorded = served.recorded()
        assert recorded["argv"] == [
            *expected_argv(served.sglang_port, "--api-key", "backend-s3cret", deterministic=deterministic),
            "--schedule-policy", "lpm", "--cuda-graph-max-bs-decode", "16", "--enable-metrics",
        ]  # fmt: skip
        assert recorded["SGLANG_RUST_SERVER"] == "0"
        assert recorded["SGLANG_WARMUP_TIMEOUT"] == "900.0"  # SGLang's warm-up may use the whole budget
        wait_until(lambda: health_status(served.url), 30, "the API to listen")
        served.process.send_signal(signal.SIGINT)
        assert served.wait_exit(15) == 0
        assert "sglang_launched" in served.output()
        assert "backend-s3cret" not in served.output()  # the key is masked in the logged command


def test_sglang_dying_makes_serve_exit_non_zero_within_two_seconds(tmp_path: Path) -> None:
    with serve_with_standin(tmp_path, LOADING) as served:
        pid = served.recorded()["pid"]
        wait_until(lambda: health_status(served.url), 30, "the API to listen")
        wait_until(lambda: "standin: serving" in served.output(), 10, "the stand-in to serve")
        os.kill(pid, signal.SIGKILL)
        began = time.monotonic()
        code = served.wait_exit(10)
        elapsed = time.monotonic() - began
        assert code != 0
        assert elapsed < 2.5, f"openjev serve took {elapsed:.2f} s to exit after SGLang died"
        output = served.output()
        assert "sglang_exited_unexpectedly" in output
        assert "-9" in output  # the exit status, and SGLang's last lines, are logged
        assert "standin: serving on" in output


def test_the_rust_frontend_refusing_the_model_is_named(tmp_path: Path) -> None:
    """SGLang 0.5.23 exits at start when its Rust frontend has no image pipeline for a multimodal-family
    model: openjev exits 1 like for any SGLang death, and says which setting avoids it."""
    env = {"OPENJEV_FRONTEND": "rust", "STANDIN_RUST_REFUSES": "1"}
    with serve_with_standin(tmp_path, env) as served:
        assert served.wait_exit(30) == 1
        assert served.recorded()["SGLANG_RUST_SERVER"] == "1"
        output = served.output()
        assert "sglang_exited_unexpectedly" in output
        assert "sglang_rust_frontend_refused_model" in output
        assert "OPENJEV_FRONTEND=python" in output


def test_a_backend_key_with_the_rust_frontend_refuses_to_start_before_launching(tmp_path: Path) -> None:
    with serve_with_standin(tmp_path, {"OPENJEV_FRONTEND": "rust", "OPENJEV_BACKEND_API_KEY": "k"}) as served:
        assert served.wait_exit(30) == 2
        assert "OPENJEV_BACKEND_API_KEY: SGLang's Rust frontend" in served.output()
        assert not served.record.exists()


def test_unknown_profile_refuses_to_start_before_launching(tmp_path: Path) -> None:
    with serve_with_standin(tmp_path, {"OPENJEV_PROFILE": "h100-fast"}) as served:
        assert served.wait_exit(30) == 2
        assert "OPENJEV_PROFILE: unknown profile 'h100-fast'" in served.output()
        assert not served.record.exists()


def test_an_environment_without_sglang_is_named(tmp_path: Path) -> None:
    with serve_with_standin(tmp_path, {"STANDIN_NO_SGLANG": "1"}) as served:
        assert served.wait_exit(30) == 2
        assert f"SGLang is not installed for {served.python}" in served.output()


def start_driver(source: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Run a launcher driver script; return it and its "serving" line (once serve_api is running)."""
    driver = subprocess.Popen(
        [sys.executable, "-c", source], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert driver.stdout is not None
    line = driver.stdout.readline()
    while not line.startswith("serving"):
        if not line:
            driver.kill()
            driver.wait()
            raise AssertionError("the driver exited before serving")
        line = driver.stdout.readline()
    return driver, line


def launched_pid(record: Path) -> int:
    """The pid the stand-in SGLang recorded once it was launched."""
    pid: int = wait_until(
        lambda: record.is_file() and record.read_text() and json.loads(record.read_text())["pid"],
        20,
        "SGLang to be launched",
    )
    return pid


_DRIVER = """
import signal, sys
from openjev.adapters.sglang.launcher import run_with_sglang
from openjev.settings import load_settings

def serve_api(env):
    print("serving", dict(env), flush=True)
    while True:
        signal.pause()

sys.exit(run_with_sglang(load_settings(), serve_api, stop_timeout=1.0))
"""


def test_an_sglang_that_ignores_sigterm_is_killed_after_the_stop_timeout(tmp_path: Path) -> None:
    python = make_standin_python(tmp_path)
    record = tmp_path / "sglang.json"
    env = clean_env({
        "OPENJEV_SGLANG_PYTHON": str(python),
        "OPENJEV_SGLANG_PORT": str(free_port()),
        "STANDIN_RECORD": str(record),
        "STANDIN_IGNORE_SIGTERM": "1",
    })  # fmt: skip
    driver, line = start_driver(_DRIVER, env)
    try:
        assert "'OPENJEV_SGLANG_URL': 'http://127.0.0.1:" in line
        assert "'OPENJEV_BACKEND': 'sglang'" in line
        pid = launched_pid(record)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=10) == 0
        assert process_gone(pid)
        assert not record.with_name(record.name + ".stopped").exists()  # it never stopped by itself
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


_STUBBORN_DRIVER = """
import signal, subprocess, sys
from openjev.adapters.sglang.launcher import run_with_sglang
from openjev.settings import load_settings

def serve_api(env):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an API server that does not stop
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("serving", worker.pid, flush=True)
    while True:
        signal.pause()

sys.exit(run_with_sglang(load_settings(), serve_api))
"""


def test_an_api_that_does_not_stop_after_sglang_died_is_cut_short(tmp_path: Path) -> None:
    python = make_standin_python(tmp_path)
    record = tmp_path / "sglang.json"
    env = clean_env({
        "OPENJEV_SGLANG_PYTHON": str(python),
        "OPENJEV_SGLANG_PORT": str(free_port()),
        "STANDIN_RECORD": str(record),
    })  # fmt: skip
    driver, line = start_driver(_STUBBORN_DRIVER, env)
    try:
        worker = int(line.split()[1])
        pid = launched_pid(record)
        os.kill(pid, signal.SIGKILL)
        began = time.monotonic()
        assert driver.wait(timeout=10) == 1
        assert time.monotonic() - began < 2.5
        assert wait_until(lambda: process_gone(worker), 5, "the API's worker to be killed")
        assert driver.stdout is not None
        assert "api_did_not_stop" in driver.stdout.read()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


@pytest.mark.integration
@pytest.mark.needs_test_assets
def test_launched_server_becomes_ready_and_answers(tmp_path: Path) -> None:
    env = {"STANDIN_LOAD_SECONDS": "1.5", "OPENJEV_TOKENIZER": str(qwen3_tokenizer_dir())}
    with serve_with_standin(tmp_path, env) as served:
        assert wait_until(lambda: health_status(served.url), 30, "the API to listen") == 503
        wait_until(lambda: health_status(served.url) == 200, 60, "the API to become ready")
        status, _, body = http(
            "POST",
            served.url + "/v1/systemone",
            {"model": "jev-latest", "state": "The sky is blue.",
             "questions": {"sky": {"type": "noul", "instructions": "Is the sky blue?"}}},
        )  # fmt: skip
        assert status == 200, body
        assert 0.0 <= body["answers"]["sky"]["noul"] <= 1.0
        served.process.send_signal(signal.SIGTERM)
        assert served.wait_exit(15) == 0


@pytest.mark.integration
@pytest.mark.needs_test_assets
def test_a_launched_sglang_serves_the_adapter_by_name(tmp_path: Path) -> None:
    """`--adapter NAME=PATH`: SGLang loads it, the API names it in every /generate (start-up's probes and
    warm-ups too), answers with its log-probabilities and serves the model as `<model>+NAME`."""
    adapter = tmp_path / "ticket-lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    env = {"STANDIN_LOAD_SECONDS": "0.5", "OPENJEV_TOKENIZER": str(qwen3_tokenizer_dir())}
    with serve_with_standin(tmp_path, env, args=["--adapter", f"ticket={adapter}"]) as served:
        wait_until(lambda: health_status(served.url) == 200, 60, "the API to become ready")
        name = "Qwen/Qwen3.6-35B-A3B+ticket"
        assert http("GET", served.url + "/health")[2]["model"] == name
        assert http("GET", served.url + "/v1/models")[2]["data"][0]["id"] == name
        question = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "sales": None}}
        status, _, body = http(
            "POST", served.url + "/v1/systemone", {"model": name, "state": "Refund me.", "questions": {"q": question}}
        )
        assert status == 200, body
        assert body["model"] == name
        recorded = http("GET", f"http://127.0.0.1:{served.sglang_port}/_emulator/requests")[2]["requests"]
        generated = [request["body"] for request in recorded if request["path"] == "/generate"]
        assert len(generated) >= 4  # start-up's two probes, the warm-up, the branch
        assert all(body.get("lora_path") == "ticket" for body in generated)
        branch = generated[-1]
        with_adapter = [logprob_of(branch["input_ids"], t, adapter="ticket") for t in branch["token_ids_logprob"]]
        without = [logprob_of(branch["input_ids"], t) for t in branch["token_ids_logprob"]]
        got = list(body["answers"]["q"]["probabilities"].values())
        assert got == pytest.approx(softmax(with_adapter), abs=1e-9)
        assert got != pytest.approx(softmax(without), abs=1e-3)
        served.process.send_signal(signal.SIGTERM)
        assert served.wait_exit(15) == 0


def softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]
