"""Debian's chromium, headless and offline, for the tests that need a real browser (`needs_chromium`).

Background networking, sync and component updates are off, so the browser itself reaches nothing
beyond what a page asks for; `--enable-logging=stderr` makes it log every Content-Security-Policy
refusal, which `refusals` picks out.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000",
]  # fmt: skip
TIMEOUT_S = 180


def run_chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Chromium with the flags above and a throwaway profile; fails the test when it exits non-zero."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: apt-get install -y chromium (.ci/run installs it)"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=TIMEOUT_S,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def render(url: str) -> tuple[str, str]:
    """(the DOM after the page's scripts ran, the browser's log) for `url`."""
    done = run_chromium("--dump-dom", url)
    return done.stdout, done.stderr


def screenshot(url: str, png: Path, size: tuple[int, int] = (1280, 2400)) -> str:
    """Write what `url` shows in a window of `size` (width, height) to `png`; the browser's log."""
    done = run_chromium(f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", url)
    assert png.is_file(), done.stderr[-2000:]
    return done.stderr


def refusals(log: str) -> list[str]:
    return [line for line in log.splitlines() if "Refused to" in line or "Content Security Policy" in line]
