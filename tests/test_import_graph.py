"""No import circle in `src/openjev`: the modules form layers, each importing only those beneath it.

What counts as an arrow A -> B (A imports B), read from the source with `ast` (nothing is imported):

- every `import` and `from ... import` in A that runs when its code runs: at module level, and
  inside functions and methods too, since an import deferred to a call (for start-up time or an
  optional dependency) still makes A depend on B;
- not those under `if TYPE_CHECKING:`, which never run (the `else:` branch counts);
- relative imports resolved against A's package; `from P import x` names module `P.x` where that is
  a module of `src/openjev`, else `P` itself; a package's `__init__` counts only where it is named
  (importing `P.x` is not an arrow to `P`);
- only modules of `src/openjev`: the standard library and third parties are no part of a circle.

A circle is a strongly connected component of more than one module (or a module importing itself);
the test names its modules and one loop through them, with each import's line.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "openjev"

Arrows = dict[str, dict[str, int]]  # module -> the modules it imports -> the line of the first such import


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, from its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports under `node` that can run: everything but the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        runs = child.orelse if isinstance(child, ast.If) and _is_type_checking(child.test) else [child]
        for statement in runs:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                yield statement
            else:
                yield from _runtime_imports(statement)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        yield submodule if submodule in known else base


def import_arrows(modules: dict[str, Path]) -> Arrows:
    known = set(modules)
    arrows: Arrows = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found = arrows.setdefault(module, {})
        for node in _runtime_imports(tree):
            for target in _targets(node, module, path.name == "__init__.py", known):
                if target in known:
                    found.setdefault(target, node.lineno)
    return arrows


def _reachable(arrows: Arrows, start: str) -> set[str]:
    """The modules `start` imports, directly or not (itself only through a loop)."""
    reached: set[str] = set()
    todo = list(arrows[start])
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(arrows[module])
    return reached


def circles(arrows: Arrows) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one that imports itself."""
    reach = {module: _reachable(arrows, module) for module in arrows}
    found: list[list[str]] = []
    for module in sorted(arrows):
        if module in reach[module] and not any(module in component for component in found):
            found.append(sorted(other for other in reach[module] if module in reach[other]))
    return found


def one_loop(arrows: Arrows, component: list[str]) -> str:
    """A shortest loop through the component's first module, each arrow with its import's line."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in came_from:
        step: list[str] = []
        for module in frontier:
            for target in arrows[module]:
                if target in members and target not in came_from:
                    came_from[target] = module
                    step.append(target)
        frontier = step
    path = [start]
    while (before := came_from[path[-1]]) != start:
        path.append(before)
    path.append(start)
    path.reverse()
    return (
        " -> ".join(f"{module} (line {arrows[module][target]})" for module, target in itertools.pairwise(path))
        + f" -> {start}"
    )


def describe(arrows: Arrows) -> list[str]:
    return [f"{', '.join(component)}: {one_loop(arrows, component)}" for component in circles(arrows)]


def test_src_has_no_import_circle() -> None:
    found = describe(import_arrows(module_files()))
    assert not found, "import circles in src/openjev:\n" + "\n".join(found)


def test_the_walk_finds_a_circle_through_deferred_and_relative_imports(tmp_path: Path) -> None:
    """The rules above on a made-up package: a deferred import closes a circle, a TYPE_CHECKING one does not."""
    package = tmp_path / PACKAGE
    (package / "inner").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "top.py": "def build() -> None:\n    from openjev.inner import leaf\n",
        "inner/__init__.py": "",
        "inner/leaf.py": "from typing import TYPE_CHECKING\nfrom .. import shared\n"
        "if TYPE_CHECKING:\n    import openjev.top\n",
        "shared.py": "from openjev.inner.leaf import thing\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    arrows = import_arrows(module_files(tmp_path))
    assert arrows["openjev.top"] == {"openjev.inner.leaf": 2}
    assert arrows["openjev.inner.leaf"] == {"openjev.shared": 2}  # the TYPE_CHECKING import is no arrow
    loop = "openjev.inner.leaf (line 2) -> openjev.shared (line 1) -> openjev.inner.leaf"
    assert describe(arrows) == [f"openjev.inner.leaf, openjev.shared: {loop}"]
