"""`uv run pytest` before `scripts/fetch-test-assets` has run: one line says what to run, nothing else runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pytest_run(test_file: str, assets: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEST_ASSETS_DIR": str(assets)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_missing_test_assets_stop_the_run_with_one_line_naming_the_command(tmp_path: Path) -> None:
    done = pytest_run("tests/adapters/test_token_floor.py", tmp_path)  # reads the Qwen3 tokenizer
    assert done.returncode == 4, done.stdout[-2000:]
    said = [line for line in done.stdout.splitlines() if "scripts/fetch-test-assets" in line]
    assert len(said) == 1 and "missing test prerequisites: the Qwen3 tokenizer" in said[0]
    assert "passed" not in done.stdout and "failed" not in done.stdout


def test_tests_that_need_no_assets_still_run_without_them(tmp_path: Path) -> None:
    done = pytest_run("tests/use_case/test_ids.py", tmp_path)
    assert done.returncode == 0 and "passed" in done.stdout, done.stdout[-2000:]
