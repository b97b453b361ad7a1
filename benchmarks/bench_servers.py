"""The servers a side-by-side benchmark starts, measures and stops: processes, requests, CPU and memory.

Each server is a process group of its own (`uv run` and vLLM start children), measured one at a time
(`alone`), with the CPU the idle ones use meanwhile charged to them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")
# The instruction sets the engines' kernels choose among, as /proc/cpuinfo names them.
INSTRUCTION_SETS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8")


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    startup: float | None = None
    model: str = "jev-latest"
    latencies: dict[int, list[float]] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)  # usage.input_tokens of each measured request
    throughput: list[float] = field(default_factory=list)
    memory: tuple[float, float] | None = None
    idle_cpu: float = 0.0  # CPU seconds this server used while the other one was being measured
    idle_wall: float = 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def post(server: Server, payload: dict[str, Any], timeout: float = 900) -> tuple[float, dict[str, Any]]:
    request = urllib.request.Request(
        f"{server.url}/v1/systemone", json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read()
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{server.name}: HTTP {exc.code} on /v1/systemone: {exc.read()[:500]!r}") from None
    reply: dict[str, Any] = json.loads(data)
    return time.perf_counter() - started, reply


def launch(name: str, command: list[str], env: dict[str, str], log_dir: Path, port: int) -> Server:
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
        )
    return Server(name=name, url=f"http://127.0.0.1:{port}", process=process, log=log)


def wait_ready(server: Server, path: str, timeout: float) -> None:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if server.process is not None and server.process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-3000:] if server.log else ""
            raise SystemExit(f"{server.name} exited with status {server.process.returncode} before ready:\n{tail}")
        try:
            with urllib.request.urlopen(server.url + path, timeout=5) as response:
                if response.status == 200:
                    server.startup = time.perf_counter() - started
                    print(f"{server.name} ready in {server.startup:.0f} s ({server.url}, log {server.log})", flush=True)
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    raise SystemExit(f"{server.name} was not ready after {timeout:.0f} s (log {server.log})")


def stop(server: Server) -> None:
    """The whole process group: vLLM runs its engine in a child process, `uv run` runs openjev in one."""
    if server.process is None or server.process.poll() is not None:
        return
    os.killpg(server.process.pid, signal.SIGTERM)
    try:
        server.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()


def process_tree(pid: int) -> list[int]:
    tree, queue = [], [pid]
    while queue:
        current = queue.pop()
        tree.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:  # a thread or process that ended meanwhile
                continue
    return tree


def cpu_seconds(server: Server) -> float:
    """CPU time used so far by the server's process tree (user + system)."""
    if server.process is None:
        return 0.0
    total = 0
    for member in process_tree(server.process.pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> tuple[float, float]:
    """Resident memory of the process tree now and its largest process's peak (VmHWM), in GiB."""
    rss, peak = 0.0, 0.0
    for member in process_tree(pid):
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{member}/status").read_text().splitlines())
        rss += int(fields["VmRSS"].split()[0]) / 2**20
        peak = max(peak, int(fields["VmHWM"].split()[0]) / 2**20)
    return rss, peak


def probabilities(reply: dict[str, Any]) -> dict[str, float]:
    """Every probability of a System One reply, flattened to `question/label`."""
    flat: dict[str, float] = {}
    for name, answer in reply["answers"].items():
        if "noul" in answer:
            flat[name] = float(answer["noul"])
        for label, p in (answer.get("probabilities") or {}).items():
            flat[f"{name}/{label}"] = float(p)
    return flat


def alone(active: Server, servers: list[Server], work: Callable[[], T]) -> T:
    """Run `work` against `active`, charging the CPU the other (idle) servers use meanwhile to them."""
    others = [s for s in servers if s is not active]
    before = [cpu_seconds(s) for s in others]
    started = time.perf_counter()
    result = work()
    wall = time.perf_counter() - started
    for server, cpu in zip(others, before, strict=True):
        server.idle_cpu += cpu_seconds(server) - cpu
        server.idle_wall += wall
    return result


def cpu_description() -> str:
    """The CPU's model and which of `INSTRUCTION_SETS` it has: a timing means little without them."""
    text = Path("/proc/cpuinfo").read_text(errors="replace")
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    present = set(flags.group(1).split()) if flags else set()
    has = [name for name in INSTRUCTION_SETS if name in present]
    lacks = [name for name in INSTRUCTION_SETS if name not in present]
    cpus = len(os.sched_getaffinity(0))
    name = model.group(1).strip() if model else "unknown CPU"
    return f"CPU: {name}, {cpus} CPUs; has {', '.join(has) or 'none of them'}; lacks {', '.join(lacks) or 'none'}"
