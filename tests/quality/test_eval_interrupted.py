"""Ctrl-C in `openjev eval` (the real CLI, a real fake server): exit 130, what was answered, the partial reports."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.smoke.servers import OPENJEV, clean_env, openjev_server, wait_ready

QUESTION = {"type": "noul", "instructions": "Positive?"}
ITEMS = [{"id": f"n{i}", "state": f"Review {i}", "question": QUESTION, "gold": i % 2 == 0} for i in range(60)]


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    # 0.2 s a call, two calls an item, two at a time: the run lasts about 12 s unless interrupted.
    with openjev_server("--backend", "fake", env={"OPENJEV_FAKE_LATENCY": "0.2"}) as url:
        wait_ready(url)
        yield url


def answered(url: str) -> int:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as reply:
        text = reply.read().decode()
    found = re.search(r'^openjev_answered_requests_total\{contract="systemone"\} (\S+)$', text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def _interruptible() -> None:
    """Ctrl-C reaches the run even when the tests run as a background job (whose SIGINT is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_with_the_summary_and_the_partial_report(slow_server: str, tmp_path: Path) -> None:
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    out, page = tmp_path / "report.json", tmp_path / "report.html"
    before = answered(slow_server)
    process = subprocess.Popen(
        [str(OPENJEV), "eval", str(data), "--url", slow_server, "--out", str(out), "--html", str(page)],
        env=clean_env({}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    deadline = time.monotonic() + 60
    while answered(slow_server) - before < 4:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and f"interrupted; partial report in {out} and {page}" in stderr
    report = json.loads(out.read_text())
    assert report["interrupted"] is True
    [items] = report["files"]
    assert 4 <= items["answered"] < len(ITEMS)
    assert items["items"] + items["unsent"] == len(ITEMS) and items["failures"] == 0
    assert f"{items['answered']}/{items['items']} answered, {items['unsent']} not sent (interrupted)" in stdout
    assert stdout.startswith("interrupted:") and "accuracy" in stdout
    html = page.read_text()
    assert 'data-interrupted="true"' in html and f"{items['answered']} of {items['items']} answered" in html
