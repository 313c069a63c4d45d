from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """Import a campaign script (``scripts/fuzz.py``, ``bench/load.py``) as a module."""
    path = ROOT / relative
    name = "hardening_" + path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def fuzz() -> ModuleType:
    return load_script("scripts/fuzz.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long campaigns (``@pytest.mark.slow``) run only when asked, so the default run stays CI-sized."""
    if config.getoption("markexpr") or os.environ.get("AIDEMEMO_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow campaign: run with -m slow or AIDEMEMO_SLOW=1")
    for item in items:
        if "slow" in item.keywords and "hardening" in item.nodeid:
            item.add_marker(skip)
