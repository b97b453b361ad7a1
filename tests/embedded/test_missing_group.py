"""Where the `embedded` dependency group is not installed (the SGLang image), choosing the embedded
backend stops start-up with a StartupError naming what to install, not an ImportError traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openjev.bootstrap import build_runtime
from openjev.domain.errors import StartupError
from openjev.settings import load_settings

# `None` in sys.modules makes `import xllamacpp` fail as if the package were absent.
WITHOUT_XLLAMACPP = (
    "import sys; sys.modules['xllamacpp'] = None; from openjev.cli import main; "
    "sys.exit(main(['serve', '--backend', 'embedded', '--port', '0']))"
)


@pytest.mark.parametrize("module", ["xllamacpp", "gguf"])
def test_build_runtime_names_the_missing_package(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(StartupError, match=rf"needs `{module}`.*`embedded` dependency group.*uv sync"):
        build_runtime(load_settings({}, backend="embedded"))


def test_the_fake_and_sglang_backends_do_not_need_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    monkeypatch.setitem(sys.modules, "gguf", None)
    assert build_runtime(load_settings({}, backend="fake")).kind == "fake"
    assert build_runtime(load_settings({}, backend="sglang")).kind == "sglang"


def test_openjev_serve_exits_2_with_the_message() -> None:
    result = subprocess.run([sys.executable, "-c", WITHOUT_XLLAMACPP], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "openjev: the embedded backend needs `xllamacpp`" in result.stderr
    assert "Traceback" not in result.stderr
