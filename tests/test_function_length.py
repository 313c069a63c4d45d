"""No function longer than 80 lines in the packages, ``scripts/`` or ``bench/``: a longer one is
usually several steps that want names. Data tables may run longer; each is exempt by name here,
with its reason.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
MAX_LINES = 80
# "path:function" -> why it may run longer (a data table, not steps). None today.
EXEMPT: dict[str, str] = {}


def _long_functions(source: str, where: str) -> list[str]:
    """``where:name (N lines)`` for each function (nested ones too) over MAX_LINES, decorators aside."""
    return [f"{where}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_LINES and f"{where}:{node.name}" not in EXEMPT]


def test_no_function_is_over_80_lines() -> None:
    files = [path for folder in (*PACKAGES, "scripts", "bench") for path in sorted((REPO / folder).rglob("*.py"))]
    assert len(files) > 100  # the walk found the tree
    long = [line for path in files for line in _long_functions(path.read_text(), str(path.relative_to(REPO)))]
    assert long == [], "split these into named steps:\n" + "\n".join(long)


def test_the_check_finds_a_long_function() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    source = f"def short():\n    return 1\n\n\nclass C:\n    def long(self):\n{body}\n"
    assert _long_functions(source, "m.py") == [f"m.py:long ({MAX_LINES + 1} lines)"]


def test_every_exemption_names_a_function_that_exists() -> None:
    for key in EXEMPT:
        path, _, name = key.partition(":")
        tree = ast.parse((REPO / path).read_text())
        assert any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in ast.walk(tree)), key
