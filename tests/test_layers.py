"""The package map's arrows are kept by import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml), checked here in every default run; and the contracts can fail.

grimp, under import-linter, reads every ``import`` statement, the ones inside functions and under
``TYPE_CHECKING`` too, so a lazy import is still an arrow. The planted breaks run on a copy of the
packages with the same contracts, so the tree itself is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES: list[str] = CONFIG["root_packages"]


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the packages found first on ``sys.path`` from ``where`` (no cache file)."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    env = {**os.environ, "COLUMNS": "400"}  # one line per contract name, however long
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=where, env=env, timeout=300)


def test_every_contract_holds() -> None:
    done = _lint(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"Contracts: {len(CONFIG['contracts'])} kept, 0 broken." in done.stdout


def test_every_package_is_under_a_contract() -> None:
    # A new top-level package must be placed in the layers (or it is outside every arrow).
    on_disk = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests", "bench", "scripts"}
    (layers,) = [c for c in CONFIG["contracts"] if c["type"] == "layers" and "containers" not in c]
    layered = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    assert on_disk == set(PACKAGES) == layered


def test_no_module_imports_itself_through_others() -> None:
    # acyclic_siblings checks packages level by level; this checks single modules, in every package.
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    cycles = [cycle for module in sorted(graph.modules)
              if (cycle := _cycle_through(graph, module)) is not None]
    assert cycles == []


def test_the_cycle_search_finds_a_cycle_behind_two_modules() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert _cycle_through(graph, "p.a") == ["p.a", "p.b", "p.c", "p.a"]
    assert _cycle_through(graph, "p.d") is None


def _private_crossings(graph: grimp.ImportGraph) -> list[str]:
    """Imports of another top-level package's private module (a ``_name`` at any depth below it)."""
    return [f"{importer} -> {imported}" for importer in sorted(graph.modules)
            for imported in sorted(graph.find_modules_directly_imported_by(importer))
            if imported.partition(".")[0] != importer.partition(".")[0]
            and any(part.startswith("_") and not part.startswith("__") for part in imported.split(".")[1:])]


def test_no_package_imports_another_packages_private_modules() -> None:
    # import-linter's wildcards match whole segments only, so `_*` cannot be a forbidden pattern:
    # this walks grimp's graph instead. A package offers other packages its public modules.
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert _private_crossings(graph) == []


def test_the_private_import_check_finds_one() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (("a.x", "b._y"), ("a.x", "b.y"), ("a._x", "a._y"), ("a.x", "b.y._z"), ("a.x", "b.__init__")):
        graph.add_import(importer=importer, imported=imported)
    assert _private_crossings(graph) == ["a.x -> b._y", "a.x -> b.y._z"]


def _cycle_through(graph: grimp.ImportGraph, module: str) -> list[str] | None:
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
        chain = graph.find_shortest_chain(importer=imported, imported=module)
        if chain is not None:
            return [module, *chain]
    return None


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages and the contracts, copied; each plant below edits one file and puts it back."""
    root = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_copy_is_clean(copy: Path) -> None:
    done = _lint(copy)
    assert done.returncode == 0, done.stdout[-4000:]


@pytest.mark.parametrize(("path", "line", "contract", "detail"), [
    # A cycle hidden from the running program: only a type checker follows this import.
    ("aidememo_wire/status.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import shapes\n",
     "No import cycle between the modules of any package, at any depth", "aidememo_wire"),
    # The XMemo reference reaching for AideMemo's server, inside a function.
    ("xmemo_ref/_records.py", "def _planted() -> None:\n    from aidememo_ref import _sqlite\n",
     "The XMemo reference knows nothing of AideMemo", "xmemo_ref._records -> aidememo_ref._sqlite"),
    # A shared piece reaching up into a product.
    ("refkit/clock.py", "from aidememo_wire import ids as _ids\n",
     "The kit's packages are layers: arrows point down only", "refkit.clock -> aidememo_wire.ids"),
    # The model reading the reference's rules: the two could then share a bug.
    ("simulations/model.py", "from aidememo_ref import _state as _rules\n",
     "The model and the linearizability library never import a reference or the wire",
     "simulations.model -> aidememo_ref._state"),
    # The profile machinery reaching back for a profile (each profile imports it): the loop that
    # ``conformance.installed`` broke, by importing profiles only by their table's names.
    ("conformance/profile.py", "def _planted() -> None:\n    from conformance.profiles import aidememo\n",
     "Profiles import the suite's shared modules, never the reverse", "conformance.profile -> conformance.profiles"),
    # The service opening a store directly instead of going through the Store protocol.
    ("aidememo_ref/_service.py", "from . import _sqlite as _planted\n",
     "The AideMemo server: verbs over the reference over service and stores over the pure core",
     "aidememo_ref._service -> aidememo_ref._sqlite"),
])
def test_a_planted_break_fails_its_contract(copy: Path, path: str, line: str, contract: str, detail: str) -> None:
    target = copy / path
    original = target.read_text()
    target.write_text(original + "\n" + line)
    try:
        done = _lint(copy)
    finally:
        target.write_text(original)
    assert done.returncode == 1, done.stdout[-4000:]
    broken = done.stdout[done.stdout.index("Broken contracts"):]
    assert contract in broken and detail in broken, broken[-4000:]
