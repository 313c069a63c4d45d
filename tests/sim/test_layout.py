"""The simulator's modules import one way: no cycles, and the model knows nothing of the reference."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "simulations"
# Below the line: the pure parts, which must never reach for the machinery above them.
PURE = {"errors", "history", "spec", "search", "native", "witness", "checker", "register", "kv", "porcupine",
        "model", "ledger", "plan", "receipts"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module(path)
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # Every import counts, the ones inside functions too: a lazy import is still an arrow.
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulations."):
                graph[name].add(node.module.removeprefix("simulations."))
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name.removeprefix("simulations.") for a in node.names
                                if a.name.startswith("simulations.")}
        graph[name].discard(name)
    return graph


def test_the_simulator_has_no_import_cycle() -> None:
    graph = _imports()
    assert {"checker", "plan", "scheduler", "targets", "planner", "execution", "campaign", "replay", "cli",
            "machines", "machines.base"} <= set(graph)
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            assert state.get(nxt) != "open", "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_the_pure_parts_never_import_the_machinery() -> None:
    graph = _imports()
    for module in PURE:
        assert graph[module] <= PURE, f"{module} imports {sorted(graph[module] - PURE)}"


def test_the_model_imports_nothing_from_the_reference() -> None:
    code = ("import sys, simulations.model, simulations.ledger, simulations.linearizability.checker, simulations.linearizability.register, simulations.linearizability.kv; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'aidememo_ref'); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
