"""The page `openjev eval --html` writes renders in a real headless Chromium, offline, under its own policy.

The real CLI measures two files against the real server on the fake backend and writes the page;
Chromium opens it from disk, prints the DOM it built (every plot of every file must be in it, as
SVG with its title) and logs any refusal under the page's Content-Security-Policy (there must be
none: nothing outside the page may load). A screenshot is written next to the page for a person to
look at; its path is printed.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.blackbox.chromium import refusals, render, screenshot
from tests.blackbox.conftest import ServerProcess, clean_env, openjev_command

pytestmark = pytest.mark.needs_chromium
TOPICS = {"World": "World news", "Sports": "Sports news", "Business": "Business news", "Science & <Tech>": None}
CHOICES: list[dict[str, Any]] = [
    {
        "id": f"c{i}",
        "state": f"Headline number {i}: " + "the story goes on. " * (i * 4),
        "question": {"type": "choice", "instructions": "Topic?", "criteria": TOPICS},
        "gold": list(TOPICS)[i % 4],
    }
    for i in range(16)
]
REVIEWS: list[dict[str, Any]] = [
    {
        "id": f"n{i}",
        "state": f"Review {i}",
        "question": {"type": "noul", "instructions": "Positive?"},
        "gold": i % 3 != 0,
    }
    for i in range(16)
]
SCREEN = (1280, 4200)  # the whole page of two files


def write_items(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def png_size(png: Path) -> tuple[int, int]:
    """(width, height) from the PNG header."""
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_eval_page_renders_every_plot_offline_under_its_policy(server: ServerProcess, tmp_path: Path) -> None:
    topics, reviews = write_items(tmp_path / "topics.jsonl", CHOICES), write_items(tmp_path / "reviews.jsonl", REVIEWS)
    page = tmp_path / "report.html"
    done = subprocess.run(
        openjev_command("eval", str(topics), str(reviews), "--url", server.url, "--reverse", "--html", str(page)),
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    dom, log = render(page.as_uri())
    assert refusals(log) == []
    sections = dict(re.findall(r'<section id="[^"]*" data-file="([^"]*)">(.*?)</section>', dom, re.DOTALL))
    assert list(sections) == [str(topics), str(reviews), "all 2 files"]
    for name, body in sections.items():
        expected = ["reliability", "confusion", "coverage", *(["roc"] if name == str(reviews) else [])]
        svgs = re.findall(r'<svg [^>]*data-plot="([a-z]+)"[^>]*>\s*<title>([^<]+)</title>', body)
        assert [plot for plot, _ in svgs] == expected, name
        assert all(title.strip() for _, title in svgs)
    assert "<title>Science &amp; &lt;Tech&gt;</title>Science &amp; &lt;Tech&gt;</text>" in dom  # text, not markup
    assert 'data-table="wrong"' in sections[str(topics)]
    png = tmp_path / "report.png"
    assert refusals(screenshot(page.as_uri(), png, SCREEN)) == []
    assert png_size(png) == SCREEN and png.stat().st_size > 20_000  # a page drawn, not a blank one
    print(f"screenshot of the eval page: {png}")
