"""Test-wide settings: property tests never fail on wall-clock time (CI shares two cores); and before
anything runs, what the selected tests need beyond `uv sync` is checked, and named in one line."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

from tests.assets import FETCH_HINT, have_qwen3_tokenizer

settings.register_profile("openjev", deadline=None)
settings.load_profile("openjev")
PREREQUISITES_MISSING = 4  # pytest's own code for a usage error


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what will not run
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = []
    if not have_qwen3_tokenizer() and any(item.get_closest_marker("needs_test_assets") for item in items):
        missing.append(f"the Qwen3 tokenizer: {FETCH_HINT}")
    if shutil.which("chromium") is None and any(item.get_closest_marker("needs_chromium") for item in items):
        missing.append("chromium: apt-get install -y chromium")
    if importlib.util.find_spec("torch") is None and any(item.get_closest_marker("needs_torch") for item in items):
        missing.append("PyTorch: uv sync --group tune")
    if missing:
        pytest.exit("missing test prerequisites: " + "; ".join(missing), returncode=PREREQUISITES_MISSING)


@pytest.fixture(autouse=True)
def _logging_configuration_restored() -> Iterator[None]:
    """A test that configures logging (an app, the CLI) binds the stream in force, `capsys`'s for one, which
    is closed after it: every later test would then fail writing a log line. The configuration is put back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
