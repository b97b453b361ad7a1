"""Installing the API into the SGLang image without moving what the image holds, then proving it.

On the deploying machine, `export_api_set` lists the API's packages at uv.lock's versions (`uv
export`, no dependency group, so neither the embedded backend nor `modal`). In the image, with the
image's own Python and before openjev is installed (so this file imports only the standard library):

    python image_env.py constraints API_SET OUT   # every installed package ==its version, then the API set's others
    python image_env.py baseline OUT              # `pip check` of the image as it came
    python image_env.py check BASELINE            # exit 1 if the install added a broken requirement

`uv pip install --constraint OUT PROJECT` between the last two then keeps every package SGLang's
image holds at its version and takes the rest at uv.lock's: a requirement of the API that the
image's versions cannot meet fails the resolution, and so the image build, instead of upgrading
SGLang's web stack under it. The check catches what a resolver would not (a package the image
already had broken is in the baseline and ignored; anything new fails the build).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

EXPORT_FLAGS = ("export", "--frozen", "--no-default-groups", "--no-hashes", "--no-emit-project", "--no-header",
                "--no-annotate")  # fmt: skip
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")
# PEP 440 versions (public part, optional local part): anything else cannot be a `==` constraint.
_VERSION = re.compile(
    r"^v?(\d+!)?\d+(\.\d+)*([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"([-_.]?(post|rev|r)[-_.]?\d*|-\d+)?([-_.]?dev[-_.]?\d*)?(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$",
    re.IGNORECASE,
)
NO_PROBLEMS = "No broken requirements found."


def normalize(name: str) -> str:
    """PEP 503: `Foo_Bar.baz` and `foo-bar-baz` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    """The normalized package name of a requirements-file line, or None for a comment, blank or option."""
    text = line.strip()
    if not text or text.startswith(("#", "-")):
        return None
    match = _NAME.match(text)
    return normalize(match.group(1)) if match else None


def installed_pins(distributions: Iterable[importlib.metadata.Distribution] | None = None) -> dict[str, str]:
    """Every distribution this Python imports, by normalized name (the first on sys.path wins, as for imports)."""
    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions() if distributions is None else distributions:
        name = dist.metadata["Name"] if dist.metadata else None
        if name and normalize(name) not in pins:
            pins[normalize(name)] = dist.version
    return pins


def merge_constraints(installed: Mapping[str, str], api_set: Iterable[str]) -> tuple[list[str], list[str]]:
    """(constraint lines, notes): the image's packages at their versions, then the API set's other lines.

    A package the image holds keeps the image's version whatever uv.lock says; one it holds under a
    version that is not PEP 440 is left out of the constraints and named in the notes.
    """
    lines: list[str] = []
    notes: list[str] = []
    for name, version in sorted(installed.items()):
        if _VERSION.match(version):
            lines.append(f"{name}=={version}")
        else:
            notes.append(f"{name} {version!r} is installed but is not a PEP 440 version: not constrained")
    for line in api_set:
        listed = requirement_name(line)
        if listed is not None and listed not in installed:
            lines.append(line.strip())
    return lines, notes


def export_api_set(project: Path, uv: str | None = None) -> list[str]:
    """uv.lock's closure of `[project.dependencies]` as `name==version ; marker` lines (on the deploying machine)."""
    binary: str | None = uv or os.environ.get("UV") or shutil.which("uv")
    if not binary:
        raise RuntimeError("uv is needed to export the API's locked versions from uv.lock: run this with `uv run`")
    result = subprocess.run([binary, *EXPORT_FLAGS], cwd=project, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"`uv {' '.join(EXPORT_FLAGS)}` failed in {project}: {result.stderr.strip()}")
    return [line.strip() for line in result.stdout.splitlines() if requirement_name(line) is not None]


def pip_check(python: str = sys.executable) -> list[str]:
    """The problems `pip check` reports for `python`'s environment (empty when it finds none)."""
    result = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip() and line.strip() != NO_PROBLEMS]
    if result.returncode not in (0, 1) or (result.returncode == 1 and not lines):
        raise RuntimeError(f"`{python} -m pip check` could not run: {result.stderr.strip() or result.stdout.strip()}")
    return lines


def new_problems(baseline: Sequence[str], now: Sequence[str]) -> list[str]:
    known = set(baseline)
    return [line for line in now if line not in known]


def main(argv: Sequence[str]) -> int:
    command, *args = argv or ("",)
    if command == "constraints" and len(args) == 2:
        api_set = Path(args[0]).read_text(encoding="utf-8").splitlines()
        lines, notes = merge_constraints(installed_pins(), api_set)
        Path(args[1]).write_text("\n".join(lines) + "\n", encoding="utf-8")
        for note in notes:
            print(f"image_env: {note}", file=sys.stderr)
        print(f"image_env: {len(lines)} constraints in {args[1]}")
        return 0
    if command == "baseline" and len(args) == 1:
        problems = pip_check()
        Path(args[0]).write_text("".join(f"{line}\n" for line in problems), encoding="utf-8")
        print(f"image_env: the image as it came has {len(problems)} pip check problem(s), kept in {args[0]}")
        return 0
    if command == "check" and len(args) == 1:
        added = new_problems(Path(args[0]).read_text(encoding="utf-8").splitlines(), pip_check())
        for line in added:
            print(f"image_env: new after installing openjev: {line}", file=sys.stderr)
        return 1 if added else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
