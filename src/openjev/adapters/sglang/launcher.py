"""`openjev serve` with SGLang: launch SGLang as a child process, run the API beside it, supervise both.

The contract with the CLI: `run_with_sglang(settings, serve_api)` starts SGLang (its own process
group, loopback only), then calls `serve_api(extra_env)`, which runs the Granian HTTP server and
blocks until it stops. The API worker connects to SGLang with the HTTP client and waits for its
/health within the start-up budget; meanwhile the API answers 503.

- If SGLang exits on its own, the API must not live on without a backend: the watcher thread logs
  the exit code and SGLang's last output lines, sends SIGTERM to this process (Granian stops its
  worker and `serve_api` returns), and `openjev serve` exits 1 so the platform replaces the
  container. If the API has not stopped HARD_EXIT_GRACE seconds later, the process kills its other
  children and exits 1 at once.
- SIGTERM or SIGINT (Granian handles them while it runs) stop the API; then SGLang gets SIGTERM on
  its whole process group, and SIGKILL if it is still there after `stop_timeout`. A second signal
  during that wait kills it at once. The exit code is then the API's (0 for a normal shutdown).
- If openjev itself dies without cleaning up (SIGKILL), SGLang gets SIGTERM from the kernel
  (PR_SET_PDEATHSIG) instead of holding the GPU as an orphan.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from types import FrameType
from typing import IO

from openjev.adapters.sglang.flags import (
    PINNED_VERSION,
    RUST_FRONTEND_REFUSAL,
    SGLANG_HOST,
    SGLangCommand,
    sglang_command,
)
from openjev.adapters.sglang.lora import adapter_setting
from openjev.domain.errors import SettingsError, StartupError
from openjev.logs import get_logger
from openjev.settings import Settings

log = get_logger("openjev.sglang.launcher")

STOP_TIMEOUT = 30.0  # SGLang's graceful shutdown (SIGTERM) before SIGKILL.
HARD_EXIT_GRACE = 1.5  # after SGLang died: how long the API gets to stop by itself.
TAIL_LINES = 40  # SGLang output lines kept to explain an unexpected exit.
PROBE_TIMEOUT = 60.0
_PROBE = "import importlib.metadata as m; print(m.version('sglang'))"
_PR_SET_PDEATHSIG = 1


class _Interrupted(BaseException):
    """SIGTERM/SIGINT arrived while no server owned the signals (BaseException: nothing swallows it)."""


def probe_sglang_version(python: str) -> str:
    """The sglang version installed for `python`; StartupError if it cannot run or has no SGLang."""
    where = "--sglang-python / OPENJEV_SGLANG_PYTHON" if python != sys.executable else "this environment"
    try:
        result = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise StartupError(f"cannot run the SGLang Python {python!r} ({where}): {exc}") from None
    version = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0 or not version:
        raise StartupError(
            f"SGLang is not installed for {python} ({where}). Install `openjev[sglang]` there (it needs "
            "CUDA), point --sglang-python at the Python of an environment that has SGLang, or use "
            "--connect URL for an SGLang that is already running."
        )
    return version


def ensure_port_free(port: int) -> None:
    """Fail early, and clearly, if something already listens where SGLang must."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((SGLANG_HOST, port))
        except OSError as exc:
            raise StartupError(
                f"OPENJEV_SGLANG_PORT: {SGLANG_HOST}:{port} is already in use ({exc.strerror}); "
                "stop what listens there or choose another port"
            ) from None


class SGLangProcess:
    """The SGLang child: started in its own process group, its output relayed and its tail kept."""

    def __init__(self, command: SGLangCommand, on_unexpected_exit: Callable[[int], None]) -> None:
        self.command = command
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.exit_code: int | None = None
        self._on_unexpected_exit = on_unexpected_exit
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._watcher: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        env = {**os.environ, **self.command.env}
        preexec = _parent_death_signal()
        try:
            self._proc = subprocess.Popen(
                list(self.command.argv),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: signals reach all of SGLang's processes
                preexec_fn=preexec,
            )
        except OSError as exc:
            raise StartupError(f"cannot start SGLang ({self.command.argv[0]}): {exc}") from None
        assert self._proc.stdout is not None
        self._reader = threading.Thread(
            target=self._relay, args=(self._proc.stdout,), name="sglang-output", daemon=True
        )
        self._watcher = threading.Thread(target=self._watch, name="sglang-watcher", daemon=True)
        self._reader.start()
        self._watcher.start()

    def _relay(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.tail.append(line)
            with contextlib.suppress(OSError, ValueError):
                print(f"[sglang] {line}", file=sys.stderr, flush=True)

    def _watch(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        self.exit_code = code
        if self._reader is not None:
            # SGLang's own children may keep the pipe open: don't wait for EOF, just for the last lines.
            self._reader.join(timeout=0.5)
        if not self._stopping.is_set():
            self._kill_group(signal.SIGKILL)  # leftovers of a crashed SGLang would hold the GPU
            self._on_unexpected_exit(code)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to the group, then SIGKILL after `timeout`; returns when the leader is gone."""
        self._stopping.set()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            log.info("sglang_stopping", pid=proc.pid, timeout_s=timeout)
            self._kill_group(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("sglang_killed", pid=proc.pid, detail=f"still running {timeout:g} s after SIGTERM")
                self._kill_group(signal.SIGKILL)
                proc.wait()
        self._kill_group(signal.SIGKILL)  # whatever of its group outlived the leader
        if self._watcher is not None:
            self._watcher.join(timeout=2)
        log.info("sglang_stopped", exit_code=proc.returncode)

    def kill(self) -> None:
        self._stopping.set()
        self._kill_group(signal.SIGKILL)

    def _kill_group(self, sig: signal.Signals) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)


def run_with_sglang(  # noqa: C901 - one supervisor loop; its cases read best side by side
    settings: Settings,
    serve_api: Callable[[Mapping[str, str]], int],
    *,
    stop_timeout: float = STOP_TIMEOUT,
) -> int:
    """Launch SGLang, run the API until it stops, stop SGLang; the exit code for `openjev serve`."""
    python = settings.sglang.sglang_python or sys.executable
    if settings.port == settings.sglang.sglang_port:
        raise SettingsError(
            f"OPENJEV_SGLANG_PORT: {settings.sglang.sglang_port} is also the API port (OPENJEV_PORT); choose another"
        )
    version = probe_sglang_version(python)
    if version != PINNED_VERSION:
        log.warning("sglang_version_untested", found=version, tested=PINNED_VERSION, python=python)
    command = sglang_command(settings, python=python, version=version)
    ensure_port_free(settings.sglang.sglang_port)

    died = threading.Event()
    timers: list[threading.Timer] = []

    def on_unexpected_exit(code: int) -> None:
        died.set()
        log.error(
            "sglang_exited_unexpectedly",
            exit_code=code,
            detail="stopping the API so that the platform replaces this server",
            last_output=list(process.tail),
        )
        if any(RUST_FRONTEND_REFUSAL in line for line in process.tail):
            log.error(
                "sglang_rust_frontend_refused_model",
                detail="SGLang's Rust frontend has no image pipeline for this model: set OPENJEV_FRONTEND=python",
            )
        os.kill(os.getpid(), signal.SIGTERM)  # Granian (or our own handler) stops serve_api
        timer = threading.Timer(HARD_EXIT_GRACE, _hard_exit, args=(process.pid,))
        timer.daemon = True
        timers.append(timer)
        timer.start()

    process = SGLangProcess(command, on_unexpected_exit)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    code = 0
    try:
        try:
            process.start()
            log.info("sglang_launched", pid=process.pid, version=version, command=command.redacted())
            code = serve_api(api_env(settings))
        except SystemExit as exc:  # Granian exits this way when its worker failed
            code = exc.code if isinstance(exc.code, int) else 1
        except _Interrupted:  # a signal before (or without) a server owning the signals
            code = 0
    finally:
        # From here on a further SIGTERM/SIGINT means "now": kill SGLang instead of waiting.
        for sig in previous:
            signal.signal(sig, lambda signum, frame: process.kill())
        try:
            process.stop(stop_timeout)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for timer in timers:
                timer.cancel()
    if died.is_set():
        return 1
    return code


def api_env(settings: Settings) -> dict[str, str]:
    """What the API worker is told: connect to the SGLang launched, and serve its adapter by name
    (SGLang loads `NAME=PATH` itself; the worker, connected, names `NAME` only: `lora.py`)."""
    env = {"OPENJEV_SGLANG_URL": f"http://{SGLANG_HOST}:{settings.sglang.sglang_port}", "OPENJEV_BACKEND": "sglang"}
    if settings.adapter is not None:
        env["OPENJEV_ADAPTER"] = adapter_setting(settings.adapter, launching=True).name
    return env


def _hard_exit(sglang_pid: int | None) -> None:
    """The API did not stop after SGLang died: kill what is left of this process tree and exit 1."""
    log.error("api_did_not_stop", detail=f"exiting {HARD_EXIT_GRACE:g} s after SGLang died")
    for pid in _children(os.getpid()):
        if pid != sglang_pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    os._exit(1)


def _children(parent: int) -> list[int]:
    """Direct children of `parent`, from /proc (Linux)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec hook asking the kernel to SIGTERM the child if openjev dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork: no dlopen in the child
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook
