"""Each package has one exception root, exported by its ``__init__``, and every exception class
the package defines derives from it (so ``except aidememo_ref.AideMemoRefError`` catches a
damaged file and an unreachable PostgreSQL alike). The walk imports every module of the
packages and reads the classes each defines.
"""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
ROOTS = {
    "refkit": "RefkitError",
    "aidememo_wire": "WireError",
    "aidememo_client": "AideMemoClientError",
    "aidememo_cli": "AideMemoCliError",
    "aidememo_ref": "AideMemoRefError",
    "xmemo_ref": "XMemoError",
    "conformance": "ConformanceError",
    "simulations": "SimulationError",
}
# "module.Class" -> why it stays outside its package's root.
OUTSIDE = {
    "conformance.reproduction.record.RecordError": "the record module is standard library only: every "
                                                   "reproduction script carries its source, so it imports no root",
    "conformance.reproduction.record.Unbound": "the same reason",
    "simulations.targets.Lost": "a signal caught inside the package; under SimulationError it would be a "
                                "ValueError, read as bad input by the command line (simulations/errors.py)",
    "simulations.linearizability.search.OutOfBudget": "the search's budget signal, caught by the checker; the "
                                                      "same reason",
}


def _exceptions(package: str) -> dict[str, type[BaseException]]:
    """Every exception class a module of ``package`` defines, by ``module.Class``."""
    root = importlib.import_module(package)
    found: dict[str, type[BaseException]] = {}
    modules = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")
                           if not m.name.endswith("__main__")]
    for name in modules:
        for value in vars(importlib.import_module(name)).values():
            # __module__ may name the package itself, where a class says its public path is
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__.split(".")[0] == package):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_package_has_a_root() -> None:
    assert sorted(ROOTS) == sorted(PACKAGES)


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_the_root_is_exported_and_every_exception_derives_from_it(package: str) -> None:
    module = importlib.import_module(package)
    root = getattr(module, ROOTS[package])
    assert ROOTS[package] in module.__all__
    found = _exceptions(package)
    assert root in found.values(), f"{ROOTS[package]} is not defined in {package}"
    stray = sorted(name for name, cls in found.items() if not issubclass(cls, root) and name not in OUTSIDE)
    assert stray == [], f"derive these from {package}.{ROOTS[package]}: {stray}"


def test_every_exception_left_outside_exists_and_is_outside() -> None:
    for name in OUTSIDE:
        package = name.split(".")[0]
        cls = _exceptions(package)[name]
        assert not issubclass(cls, getattr(importlib.import_module(package), ROOTS[package]))


def test_the_facade_names_the_servers_errors() -> None:
    import aidememo_ref
    from aidememo_ref import _gateway, _provision, _records

    for error in (aidememo_ref.StoreError, aidememo_ref.ProvisionError, aidememo_ref.BindingsError,
                  _records.RecordError):
        assert issubclass(error, aidememo_ref.AideMemoRefError)
    assert aidememo_ref.ProvisionError is _provision.ProvisionError  # the rules' class, whoever re-exports it
    assert aidememo_ref.BindingsError is _gateway.BindingsError
    assert issubclass(_records.RecordError, ValueError)  # and still what it was
