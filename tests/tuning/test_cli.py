"""`openjev tune` without PyTorch installed says in one line what to run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from openjev.cli import main
from openjev.tuning import cli


def test_without_torch_the_command_names_the_group_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    assert main(["tune", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "out")]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [cli.NEEDS_TORCH] and "uv run --group tune openjev tune" in said[0]
    assert not (tmp_path / "out").exists()


def test_a_tuned_adapter_is_refused_on_sglang_instead_of_being_ignored(tmp_path: Path) -> None:
    """A folder `openjev tune` wrote holds a GGUF adapter for an embedded model: SGLang cannot serve it."""
    from openjev.bootstrap import build_runtime
    from openjev.domain.errors import SettingsError
    from openjev.settings import load_settings

    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "adapter.gguf").write_bytes(b"GGUF")
    for where in ({"OPENJEV_SGLANG_URL": "http://127.0.0.1:1"}, {"OPENJEV_SGLANG_PYTHON": "/opt/sglang/bin/python"}):
        settings = load_settings({"OPENJEV_ADAPTER": str(tmp_path), **where})
        with pytest.raises(
            SettingsError, match=r"`openjev tune` writes: it is for the embedded engine.* PEFT's format"
        ):
            build_runtime(settings)


def test_an_adapter_name_is_safe_for_a_model_id_and_a_cache_path(tmp_path: Path) -> None:
    from openjev.adapters.embedded.tuned import adapter_name

    assert adapter_name("my adapter/../x") == "my-adapter-..-x"
    assert adapter_name("..") == "adapter"
    with pytest.raises(SystemExit):
        main(["tune", str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "o"), "--name", "../escape"])
