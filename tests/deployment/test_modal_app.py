"""modal_app.py with no Modal account: what it tells Modal, its process handling, its smoke step.

Importing the app is lazy in modal 1.6 (no token, no network); HOME is isolated so no local Modal
config can leak in. Nothing here runs `modal run` or `modal deploy`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from openjev.adapters.sglang.flags import PINNED_VERSION, sglang_command
from openjev.adapters.sglang.launcher import STOP_TIMEOUT
from openjev.deployment.checkpoint import CheckpointError
from openjev.listen import free_port
from openjev.settings import SGLANG_DEFAULT_REVISION, load_settings
from tests.smoke.servers import clean_env, openjev_server
from tests.smoke.smoke_stub import StubServer

ROOT = Path(__file__).resolve().parents[2]
MODAL_VARIABLES = ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE", "MODAL_ENVIRONMENT", "MODAL_CONFIG_PATH")
DEPLOY_VARIABLES = ("OPENJEV_PROFILE", "OPENJEV_FRONTEND", "OPENJEV_SERVED_MODEL_NAME", "OPENJEV_MIN_CONTAINERS",
                    "OPENJEV_MAX_CONTAINERS", "OPENJEV_API_KEY_SECRET", "OPENJEV_REVISION")  # fmt: skip
SNAPSHOT = f"/cache/huggingface/hub/models--nvidia--Qwen3.6-35B-A3B-NVFP4/snapshots/{SGLANG_DEFAULT_REVISION}"


Loader = Callable[..., ModuleType]


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Loader:
    """Import (or re-import) modal_app with the given deploy-time environment."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*MODAL_VARIABLES, *DEPLOY_VARIABLES):
        monkeypatch.delenv(name, raising=False)

    def _load(**env: str) -> ModuleType:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        import modal_app

        return importlib.reload(modal_app)

    return _load


def test_what_modal_is_told(load: Loader) -> None:
    app = load()
    options = app.SERVER_OPTIONS
    assert options["gpu"] == "B200:1"
    assert options["routing_region"] == "us-west"
    assert options["compute_region"] == "us"
    assert options["scaledown_window"] == 300
    assert options["startup_timeout"] >= 60 * 60
    assert options["unauthenticated"] is True
    assert options["min_containers"] == 0
    assert "max_containers" not in options  # no cap: Modal adds GPUs as load needs
    assert options["volumes"] == {"/cache": app.volume}
    assert options["env"] == {
        "OPENJEV_STARTUP_TIMEOUT": str(55 * 60),
        "OPENJEV_SHUTDOWN_TIMEOUT": "130",
        "OPENJEV_PROFILE": "b200-nvfp4",
        "OPENJEV_MODEL": SNAPSHOT,  # the Volume's copy, by path
        "OPENJEV_REVISION": SGLANG_DEFAULT_REVISION,
        "HF_HUB_OFFLINE": "1",  # nothing in the GPU container asks the Hub
    }
    assert options["secrets"] == []  # no API key unless OPENJEV_API_KEY_SECRET names one
    assert app.API_STARTUP_BUDGET < app.STARTUP_TIMEOUT
    assert app.VOLUME_NAME == "openjev-huggingface"
    assert isinstance(app.OpenJev, app.modal.Server)


def test_modal_recorded_the_gpu_volume_and_region(load: Loader) -> None:
    """Modal's own function spec (a private attribute of modal 1.6) holds what the decorator got."""
    app = load()
    from modal._utils.async_utils import synchronizer

    spec = synchronizer._translate_in(app.OpenJev)._get_service_function()._spec  # type: ignore[no-untyped-call]
    assert spec.gpus == "B200:1"
    assert list(spec.scheduler_placement.regions) == ["us"]
    assert set(spec.volumes) == {"/cache"}
    assert "openjev-huggingface" in repr(spec.volumes["/cache"])


def test_the_image_is_the_pinned_sglang_release(load: Loader) -> None:
    app = load()
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sglang"]
    assert pins == [f"sglang=={PINNED_VERSION}"]
    assert re.fullmatch(rf"lmsysorg/sglang:v{re.escape(PINNED_VERSION)}-cu13\d", app.SGLANG_IMAGE)


def test_deploy_time_variables_are_forwarded(load: Loader) -> None:
    app = load(
        OPENJEV_PROFILE="default",
        OPENJEV_FRONTEND="python",
        OPENJEV_SERVED_MODEL_NAME="acme/jev",
        OPENJEV_MIN_CONTAINERS="1",
        OPENJEV_API_KEY="not-forwarded",
    )
    env = app.SERVER_OPTIONS["env"]
    assert env["OPENJEV_PROFILE"] == "default"  # overrides the B200 profile
    assert env["OPENJEV_FRONTEND"] == "python"
    assert env["OPENJEV_SERVED_MODEL_NAME"] == "acme/jev"
    assert "OPENJEV_API_KEY" not in env
    assert app.SERVER_OPTIONS["min_containers"] == 1


def test_modal_run_takes_the_smoke_options(load: Loader) -> None:
    """`uv run modal run modal_app.py --startup-timeout 600 --out r.json --key K` parses (modal's own CLI code)."""
    app = load()
    from modal.cli.run import _get_click_command_for_local_entrypoint

    command = _get_click_command_for_local_entrypoint(app.app, app.main)
    assert {p.opts[0]: p.default for p in command.params} == {
        "--out": "smoke-result.json",
        "--startup-timeout": 3600,
        "--key": "",
    }


def test_a_bad_min_containers_stops_the_deploy(load: Loader) -> None:
    with pytest.raises(ValueError, match="OPENJEV_MIN_CONTAINERS"):
        load(OPENJEV_MIN_CONTAINERS="one")


def test_every_cache_lives_in_the_volume(load: Loader) -> None:
    app = load()
    env = app.cache_env()
    names = ("HF_HOME", "HF_HUB_CACHE", "TRITON_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
             "SGLANG_CACHE_DIR", "SGLANG_JIT_CACHE_DIR")  # fmt: skip
    for name in names:
        assert env[name].startswith("/cache/"), name
    # SGLang 0.5.23 writes under SGLANG_CACHE_DIR (default ~/.cache/sglang) and its JIT builds under
    # SGLANG_JIT_CACHE_DIR (default ~/.cache/sglang/jit, not derived from SGLANG_CACHE_DIR).
    assert env["SGLANG_CACHE_DIR"] == "/cache/sglang" and env["SGLANG_JIT_CACHE_DIR"] == "/cache/sglang/jit"


def test_a_fresh_volume_gets_its_cache_folders_and_no_dangling_link(load: Loader, tmp_path: Path) -> None:
    """A link from ~/.cache/sglang to a folder a fresh Volume lacks makes SGLang's first
    `mkdir(parents=True, exist_ok=True)` under it raise FileExistsError; the cache folders are set by
    variables instead and created at container start."""
    app = load()
    dangling = tmp_path / "home" / ".cache" / "sglang"
    dangling.parent.mkdir(parents=True)
    dangling.symlink_to(tmp_path / "old-volume" / "sglang")
    with pytest.raises(FileExistsError):
        (dangling / "flashinfer" / "autotune").mkdir(parents=True, exist_ok=True)

    assert not hasattr(app, "home_cache_links")
    root = str(tmp_path / "volume")
    env = app.cache_env(root)
    made = app.prepare_cache_dirs(env, root)
    assert all(path.is_dir() and not path.is_symlink() for path in made)
    assert {Path(env["SGLANG_CACHE_DIR"]), Path(env["HF_HUB_CACHE"]), Path(env["TRITON_CACHE_DIR"])} <= set(made)
    (Path(env["SGLANG_CACHE_DIR"]) / "flashinfer" / "autotune").mkdir(parents=True, exist_ok=True)  # as SGLang does
    assert app.prepare_cache_dirs(env, root) == made  # a later start finds them: no error


def test_only_the_installable_project_is_copied(load: Loader) -> None:
    app = load()
    copied = {
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*")
        if path.is_file() and app.is_project_file(path.relative_to(ROOT))
    }
    assert {"pyproject.toml", "src/openjev/cli.py", "src/openjev/smoke/runner.py"} <= copied
    assert not [p for p in copied if p.startswith(("tests/", ".venv/", ".git/", ".cache/")) or "__pycache__" in p]
    assert app.is_project_file(Path("src"))  # the directory itself is walked, not pruned


def _loopback(command: list[str], port: int) -> list[str]:
    return [("127.0.0.1" if arg == "0.0.0.0" else str(port) if arg == "8000" else arg) for arg in command]


def test_the_entry_command_fails_fast_when_sglang_cannot_start(load: Loader) -> None:
    """The real `openjev serve --backend sglang` with an SGLang that cannot run exits non-zero, and
    the start-up wait turns that into an error, so Modal replaces the container. (The SGLang Python
    is pointed at a path that does not exist, so no machine ever launches a real SGLang here.)"""
    app = load()
    command = app.serve_command(sys.executable)
    assert command[1:] == ["-m", "openjev.cli", "serve", "--backend", "sglang", "--host", "0.0.0.0", "--port", "8000"]
    port = free_port()
    process = subprocess.Popen(
        _loopback(command, port),
        env=clean_env({"OPENJEV_SGLANG_PYTHON": "/nonexistent/python"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with pytest.raises(RuntimeError, match="exited with status 2 while starting"):
        app.wait_until_serving(process, f"http://127.0.0.1:{port}/health", timeout=60, interval=0.1)
    assert process.stderr is not None
    assert b"cannot run the SGLang Python '/nonexistent/python'" in process.stderr.read()


def test_start_up_waits_for_health(load: Loader) -> None:
    app = load()
    with openjev_server("--backend", "fake") as url:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            app.wait_until_serving(sleeper, url + "/health", timeout=60, interval=0.1)
            began = time.monotonic()
            with pytest.raises(TimeoutError):
                app.wait_until_serving(sleeper, "http://127.0.0.1:9/health", timeout=0.3, interval=0.1)
            assert time.monotonic() - began < 5
        finally:
            sleeper.kill()
            sleeper.wait()


def test_an_unexpected_exit_ends_the_container(load: Loader) -> None:
    app = load()
    exits: list[int] = []
    for code, expected in ((3, 3), (0, 1)):
        process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
        app.watch(process, threading.Event(), exits.append)
        assert exits[-1] == expected
    stopping = threading.Event()
    stopping.set()
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    app.watch(process, stopping, exits.append)
    assert len(exits) == 2  # an exit we asked for is not a failure


def test_stop_kills_what_ignores_sigterm(load: Loader) -> None:
    app = load()
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None
    stubborn.stdout.readline()  # the handler is installed
    began = time.monotonic()
    app.stop(stubborn, timeout=0.5)
    assert stubborn.returncode == -9
    assert time.monotonic() - began < 5


class FakePrefetch:
    """Stands in for the `prefetch` Modal Function: records that the entrypoint called it first."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def remote(self) -> str:
        self.calls.append("prefetch")
        return "prefetched"


async def test_the_entrypoint_smoke_checks_the_deployment(
    load: Loader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`modal run`'s local entrypoint, with the URL Modal would give replaced by loopback servers."""
    app = load()
    calls: list[str] = []
    monkeypatch.setattr(app, "prefetch", FakePrefetch(calls))
    good, swapped = StubServer(), StubServer(swap=True)
    good_url, swapped_url = await good.start(free_port()), await swapped.start(free_port())
    try:
        out = tmp_path / "smoke-result.json"

        def deployed() -> str:
            calls.append("smoke")
            return good_url

        monkeypatch.setattr(app, "deployed_url", deployed)
        # The entrypoint is synchronous and runs its own event loop: keep it off the test's loop.
        await asyncio.to_thread(app.main, out=str(out), startup_timeout=30.0, key="")
        assert json.loads(out.read_text())["ok"] is True
        assert calls == ["prefetch", "smoke"]  # the Volume is filled before any GPU container is asked for
        monkeypatch.setattr(app, "deployed_url", lambda: swapped_url)
        with pytest.raises(SystemExit) as failure:
            await asyncio.to_thread(app.main, out=str(out), startup_timeout=30.0, key="")
        assert failure.value.code == 1
        assert json.loads(out.read_text())["ok"] is False
    finally:
        await good.stop()
        await swapped.stop()


def test_the_smoke_step_against_the_fake_backend(load: Loader, tmp_path: Path) -> None:
    app = load()
    out = tmp_path / "smoke-result.json"
    with openjev_server("--backend", "fake") as url:
        code = app.smoke_step(url, out=str(out), startup_timeout=60, key=None)
    saved = json.loads(out.read_text())
    checks = {c["name"]: c for c in saved["checks"]}
    structural = ("startup", "models", "all_types", "choice_64", "choice_65_refused", "catalog_model_accepted")
    assert all(checks[name]["ok"] for name in structural)
    assert saved["server_model"] == "openjev/fake"
    assert code == (0 if saved["ok"] else 1)  # the fake's answers mean nothing: semantics may fail


def test_shutdown_budgets_nest_around_the_request_timeout(load: Loader) -> None:
    """In-flight requests get the request timeout and more, then SGLang its stop time, all inside Modal's grace."""
    app = load()
    env = app.SERVER_OPTIONS["env"]
    container = load_settings(env)  # the container's settings parse (OPENJEV_SHUTDOWN_TIMEOUT is 1 to 1800)
    assert container.request_timeout == app.REQUEST_TIMEOUT == 120
    assert container.shutdown_timeout == app.API_SHUTDOWN_TIMEOUT > container.request_timeout
    assert app.SERVE_STOP_TIMEOUT >= app.API_SHUTDOWN_TIMEOUT + STOP_TIMEOUT
    assert app.SERVE_STOP_TIMEOUT < app.EXIT_GRACE_PERIOD <= 3600  # modal 1.6.4's bound for an @app.server
    assert app.SERVER_OPTIONS["exit_grace_period"] == app.EXIT_GRACE_PERIOD == 180


def test_start_up_budgets_nest(load: Loader) -> None:
    """SGLang's warm-up may take openjev's whole budget, which ends before Modal's."""
    app = load()
    container = load_settings(app.SERVER_OPTIONS["env"])
    warmup = float(sglang_command(container, python="python").env["SGLANG_WARMUP_TIMEOUT"])
    assert warmup == container.sglang.startup_timeout == app.API_STARTUP_BUDGET < app.SERVER_OPTIONS["startup_timeout"]


def test_the_checkpoint_is_pinned_and_moves_with_one_setting(load: Loader) -> None:
    app = load()
    assert app.CHECKPOINT.revision == SGLANG_DEFAULT_REVISION
    assert app.prefetch_options({}, None, None)["env"] == {"OPENJEV_REVISION": SGLANG_DEFAULT_REVISION}
    moved = load(OPENJEV_REVISION="a" * 40)
    assert moved.SERVER_OPTIONS["env"]["OPENJEV_MODEL"].endswith("/snapshots/" + "a" * 40)
    assert moved.SERVER_OPTIONS["env"]["OPENJEV_REVISION"] == moved.CHECKPOINT.revision == "a" * 40
    assert moved.prefetch_options(dict(OPENJEV_REVISION="a" * 40), None, None)["env"]["OPENJEV_REVISION"] == "a" * 40
    with pytest.raises(CheckpointError, match="full 40-character commit id"):
        load(OPENJEV_REVISION="main")


def test_prefetch_is_a_cpu_function_on_the_same_volume(load: Loader) -> None:
    app = load()
    from modal._utils.async_utils import synchronizer
    from modal.cli.run import _get_click_command_for_function

    spec = synchronizer._translate_in(app.prefetch)._spec  # type: ignore[no-untyped-call]
    assert spec.gpus is None
    assert set(spec.volumes) == {"/cache"} and "openjev-huggingface" in repr(spec.volumes["/cache"])
    assert spec.image is synchronizer._translate_in(app.IMAGE)  # type: ignore[no-untyped-call]
    import click

    command = _get_click_command_for_function(app.app, app.prefetch, click.Context(click.Command("run")))
    assert [p.opts for p in command.params] == [["--force"]]  # `modal run modal_app.py::prefetch [--force]`


def test_a_gpu_container_refuses_to_start_before_prefetch(
    load: Loader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No record in the Volume: the start fails with the command to run, before SGLang (or any GPU work)."""
    app = load()
    from modal._utils.async_utils import synchronizer

    launched: list[object] = []
    monkeypatch.setattr(app.subprocess, "Popen", lambda *a, **k: launched.append(a))
    monkeypatch.setattr(app, "HUB_CACHE", tmp_path / "hub")
    monkeypatch.setattr(app, "CHECKPOINT_RECORDS", str(tmp_path / "records"))
    monkeypatch.setattr(app, "prepare_cache_dirs", lambda env: [])
    server = synchronizer._translate_in(app.OpenJev)._get_user_cls()()  # type: ignore[no-untyped-call]
    with pytest.raises(CheckpointError, match=r"modal run modal_app.py::prefetch"):
        server.start()
    assert launched == []


def test_the_container_cap_is_opt_in(load: Loader) -> None:
    assert "max_containers" not in load().SERVER_OPTIONS
    app = load(OPENJEV_MAX_CONTAINERS="3")
    assert app.SERVER_OPTIONS["max_containers"] == 3
    for bad in ("0", "three", "-1"):
        with pytest.raises(ValueError, match="OPENJEV_MAX_CONTAINERS"):
            load(OPENJEV_MAX_CONTAINERS=bad)
    with pytest.raises(ValueError, match="OPENJEV_MAX_CONTAINERS=1 is below OPENJEV_MIN_CONTAINERS=2"):
        load(OPENJEV_MAX_CONTAINERS="1", OPENJEV_MIN_CONTAINERS="2")


def test_the_api_key_comes_from_a_named_secret_when_asked(load: Loader) -> None:
    assert load().secret_requests({}) == []
    app = load(OPENJEV_API_KEY_SECRET="openjev-key")
    assert app.secret_requests(dict(OPENJEV_API_KEY_SECRET="openjev-key")) == [("openjev-key", ["OPENJEV_API_KEY"])]
    assert [repr(s) for s in app.SERVER_OPTIONS["secrets"]] == ["modal.Secret.from_name('openjev-key')"]
    assert [repr(s) for s in app.prefetch_options(dict(OPENJEV_API_KEY_SECRET="k"), None, None)["secrets"]] == [
        "modal.Secret.from_name('k')"
    ]
    assert app.SERVER_OPTIONS["unauthenticated"] is True  # Modal's proxy auth stays off: the key is the gate
    assert "OPENJEV_API_KEY_SECRET" not in app.SERVER_OPTIONS["env"]  # a deploy-time setting, not the server's


def test_the_image_installs_the_api_against_constraints_then_checks(load: Loader, tmp_path: Path) -> None:
    """The commands around `uv pip install`: the API set from uv.lock, the constraints, the pip check."""
    app = load()
    assert any(line.startswith("litestar==") for line in app.API_SET)
    before, options, after = app.install_steps(app.API_SET)
    script = "/opt/openjev/src/openjev/deployment/image_env.py"
    assert before[1:] == [
        f"python {script} constraints /opt/openjev/image/api-set.txt /opt/openjev/image/constraints.txt",
        f"python {script} baseline /opt/openjev/image/pip-check-before.txt",
    ]
    assert options == "--constraint /opt/openjev/image/constraints.txt"
    assert after == [f"python {script} check /opt/openjev/image/pip-check-before.txt"]
    assert app.is_project_file(Path("src/openjev/deployment/image_env.py"))  # the script is in the image
    # The first command writes the API set verbatim (markers, quotes and all): run it with a local path.
    target = tmp_path / "image" / "api-set.txt"
    subprocess.run(["sh", "-c", app.write_lines_command(str(target), app.API_SET)], check=True)
    assert target.read_text().splitlines() == app.API_SET
    assert any("'" in line for line in app.API_SET)  # e.g. `; sys_platform != 'win32'`: quoting is exercised
