"""docs/ARCHITECTURE.md's "Where each rule lives" holds against the code (issue 37).

Every name in the table's second column resolves; each is defined (a ``def``, a ``class`` or an
assignment, at module or class level) in its one place and, beyond it, only in the modules the
third column names (or another row's home: two rules may share a name, such as ``decide``). A rule copied into a new module, or a row naming a module that
no longer holds it, fails here.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aidememo_ref", "aidememo_cli", "aidememo_client", "aidememo_wire", "xmemo_ref", "refkit",
            "conformance", "simulations")


def _rows() -> list[tuple[str, list[str], set[str]]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("rule", "") or set(cells[0]) <= {"-"}:
            continue
        rows.append((cells[0], re.findall(r"`([\w.]+)`", cells[1]), set(re.findall(r"`([\w.]+)`", cells[2]))))
    return rows


@functools.cache
def _index() -> dict[str, frozenset[str]]:
    """Every name the packages define at module or class level -> the modules defining it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bodies = [tree.body] + [node.body for node in tree.body if isinstance(node, ast.ClassDef)]
            for node in (n for body in bodies for n in body):
                names: list[str] = []
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names = [node.name]
                elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Name, ast.Attribute)):
                    continue  # a name for the home's object (an injectable default), not a second rule
                elif isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names = [node.target.id]
                for name in names:
                    found.setdefault(name, set()).add(module)
    return {name: frozenset(modules) for name, modules in found.items()}


def _definers(name: str) -> frozenset[str]:
    """The modules of the packages that define ``name`` at module or class level."""
    return _index().get(name, frozenset())


ROWS = _rows()
HOMES: dict[str, set[str]] = {}  # a name -> the modules whose row makes it a home (two rules may share a name)
for _home in (home for row in ROWS for home in row[1]):
    HOMES.setdefault(_home.rpartition(".")[2], set()).add(_home.rpartition(".")[0])


def test_the_table_is_there() -> None:
    assert len(ROWS) >= 10, ROWS


@pytest.mark.parametrize(("rule", "homes", "apart"), ROWS, ids=[row[0][:40] for row in ROWS])
def test_each_rule_lives_in_its_one_place(rule: str, homes: list[str], apart: set[str]) -> None:
    assert homes, f"{rule}: no home named"
    for home in homes:
        module_name, _, name = home.rpartition(".")
        module = importlib.import_module(module_name)
        assert hasattr(module, name), f"{rule}: {home} does not exist"
        elsewhere = _definers(name) - HOMES.get(name, set()) - apart
        assert not elsewhere, f"{rule}: {name} is also defined in {sorted(elsewhere)} (docs/ARCHITECTURE.md)"
