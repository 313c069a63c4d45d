"""No module-level constant of the packages is assigned anywhere but where it is defined.

A rule constant rewritten at run time (``setattr(_state, "LEASE_MS", ...)``) changes the rules
for every ledger in the process, and modules that copied the value at import keep the old one.
Settings are handed to constructors instead (``ReferenceLedger(lease_ms=...)``). The walk reads
the packages' syntax trees: ``setattr(module, "NAME", ...)``, ``module.NAME = ...`` (also
augmented or annotated) and ``global NAME`` are refused for any UPPER_CASE name that some
package module binds at module level.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
_UPPER = re.compile(r"_?[A-Z][A-Z0-9_]*")


def _module_constants(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and _UPPER.fullmatch(leaf.id):
                    names.add(leaf.id)
    return names


def _rebindings(tree: ast.Module, constants: set[str]) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for each assignment to a module constant from outside its definition."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called == "setattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                name = node.args[1].value
                if isinstance(name, str) and name in constants:
                    yield node.lineno, f"setattr(..., {name!r})"
        elif isinstance(node, ast.Global):
            for name in node.names:
                if name in constants:
                    yield node.lineno, f"global {name}"
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for leaf in _bound(targets):
                if (isinstance(leaf, ast.Attribute) and leaf.attr in constants
                        and not (isinstance(leaf.value, ast.Name) and leaf.value.id in ("self", "cls"))):
                    yield node.lineno, f"{ast.unparse(leaf)} = ..."


def _bound(targets: list[ast.expr]) -> Iterator[ast.expr]:
    """What an assignment binds: its targets, unpacked (not what a subscript's index reads)."""
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _bound(target.elts)
        elif isinstance(target, ast.Starred):
            yield from _bound([target.value])
        else:
            yield target


def _offences(files: list[Path], root: Path) -> list[str]:
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    constants = set().union(*(_module_constants(tree) for tree in trees.values()))
    return [f"{path.relative_to(root)}:{line}: {what}"
            for path, tree in trees.items() for line, what in sorted(_rebindings(tree, constants))]


def test_no_module_constant_is_assigned_outside_its_definition() -> None:
    files = [path for folder in PACKAGES for path in sorted((REPO / folder).rglob("*.py"))]
    assert len(files) > 100  # the walk found the tree
    offences = _offences(files, REPO)
    assert offences == [], "hand these settings to a constructor instead:\n" + "\n".join(offences)


def test_the_walk_finds_each_way_of_rewriting_a_constant(tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text("LEASE_MS = 120_000\nlimit = 3\n")
    (tmp_path / "serve.py").write_text(
        "import rules\n"
        "setattr(rules, 'LEASE_MS', 400)\n"
        "rules.LEASE_MS = 400\n"
        "rules.LEASE_MS += 1\n"
        "def f():\n    global LEASE_MS\n    LEASE_MS = 1\n"
        "a, rules.LEASE_MS = 1, 2\n"
        "rules.limit = 4\n"  # not a constant's name: allowed
        "class C:\n    def __init__(self):\n        self.LEASE_MS = 5\n")  # an attribute of one object
    assert _offences([tmp_path / "rules.py", tmp_path / "serve.py"], tmp_path) == [
        "serve.py:2: setattr(..., 'LEASE_MS')",
        "serve.py:3: rules.LEASE_MS = ...",
        "serve.py:4: rules.LEASE_MS = ...",
        "serve.py:6: global LEASE_MS",
        "serve.py:8: rules.LEASE_MS = ...",
    ]
