"""Schemathesis against the real server: the OpenAPI document describes exactly what the server does.

Every check runs, including `positive_data_acceptance` ("schema-valid request rejected": the
document's request schema must carry the limits in force) and `ignored_auth` (a keyed server must
declare its security scheme and refuse requests without the key). A fixed seed and a small example
budget keep the run short and repeatable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.blackbox.conftest import API_KEY, ServerProcess

pytestmark = pytest.mark.slow  # a fifth of the offline suite: `-m "not slow and not integration"` leaves it out
ROOT = Path(__file__).resolve().parents[2]

MAX_EXAMPLES = "40"
SEED = "20261130"


def schemathesis(server: ServerProcess, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        MAX_EXAMPLES,
        "--seed",
        SEED,
        "--generation-database",
        "none",
        "--no-color",
        *extra,
    ]
    # The hooks drop only the Decisions rules JSON Schema cannot state (schemathesis_hooks.py).
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.blackbox.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=240, check=False, cwd=cwd, env=env
    )  # its cache in cwd


def test_a_server_without_a_key_conforms_to_its_document(server: ServerProcess, tmp_path: Path) -> None:
    run = schemathesis(server, tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout


@pytest.mark.parametrize("with_key", [True, False], ids=["with-the-key", "without-the-key"])
def test_a_keyed_server_conforms_to_its_document(keyed_server: ServerProcess, with_key: bool, tmp_path: Path) -> None:
    run = schemathesis(keyed_server, tmp_path, *(["--header", f"Authorization: Bearer {API_KEY}"] if with_key else []))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    # Without the key every guarded operation answers 401 only, which schemathesis reports as a warning.
    assert ("No issues found" if with_key else "4 operations returned only 401/403 responses") in run.stdout
