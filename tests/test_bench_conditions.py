"""Every bench script states the conditions of its figures (``bench/_conditions.py``): the load
average at its start and end beside each figure, whether bytecode was cached, and a mark on a
figure taken at load above 1 on these 2-core machines. Nothing here times anything."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
# bench/sim.py states its own conditions (its owner's helper prints them).
SCRIPTS = ("ledger", "xmemo", "suite", "records", "leases", "load", "cli", "diff", "hostile_memory")


def _module(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_prints_its_conditions_at_start_beside_each_figure_and_at_end(name: str) -> None:
    tree = ast.parse((BENCH / f"{name}.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "_conditions" for alias in node.names}
    called = {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
              for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, (ast.Name, ast.Attribute))}
    assert {"opening", "closing"} <= imported & called, f"bench/{name}.py does not open and close with its conditions"
    assert "mark" in called, f"bench/{name}.py prints no figure with its load beside it"


def test_a_figure_shows_both_loads_and_is_marked_only_above_one() -> None:
    conditions = _module("_conditions")
    quiet = conditions.mark("1000 ops/s", 0.4, 0.9)
    assert quiet == "1000 ops/s | load 0.40 -> 0.90"
    assert "LOADED" in conditions.mark("1000 ops/s", 0.4, 1.2)
    assert "LOADED" in conditions.mark("1000 ops/s", 1.5, 0.8)


def test_the_opening_line_says_whether_bytecode_was_cached(capsys: pytest.CaptureFixture[str]) -> None:
    conditions = _module("_conditions")
    conditions.opening("a test")
    line = capsys.readouterr().out
    assert "load average" in line and "at start" in line
    assert "bytecode cached" in line or "bytecode not cached" in line
    assert ("not written (PYTHONDONTWRITEBYTECODE set)" in line) == bool(sys.dont_write_bytecode)


def test_the_capture_mix_is_the_clients_shapes_and_the_reference_takes_every_one(tmp_path: Path) -> None:
    xmemo = _module("xmemo")
    drawn = [xmemo.mixed(i) for i in range(300)]
    assert drawn == [xmemo.mixed(i) for i in range(300)]  # the same mix on every run
    bodies = [json.loads(body) for _, body in drawn]
    assert all(body["path"] and body["scope"] for body in bodies)
    assert {body.get("memory_type") for body in bodies} == {"semantic", "auto", None}  # Hermes, OpenClaw, MAF
    assert {path for path, _ in drawn} == {"/v1/remember", "/api/v1/remember"}
    assert sum("metadata" in body for body in bodies) > 100
    lengths = [len(body["content"]) for body in bodies]
    assert min(lengths) < 40 and max(lengths) > 300 and len({body["content"] for body in bodies}) == 300
    steps = xmemo.capture_steps(tmp_path)
    steps["mix"].prepare(0, 60)
    for i in range(60):
        steps["mix"](i)  # asserts each answer is 200
