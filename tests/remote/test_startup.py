"""The remote route's start-up: httpx without its command-line client (bench/cli.py has the figures)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import importlib.util, sys
import aidememo_cli._commands.remote
loaded = sorted(name for name in ("click", "pygments", "rich", "httpx._main") if name in sys.modules)
print(",".join(loaded) or "-", importlib.util.find_spec("click") is not None)
"""


# httpx's package import loads its command-line client (httpx._main, with click and pygments when
# installed). The sys.modules mark that hid it was a process-wide side effect and is gone; strict,
# so the start-up work that removes the cost another way must also remove this mark.
@pytest.mark.xfail(strict=True, reason="httpx's package import loads click and pygments")
def test_the_remote_route_never_loads_httpxs_cli_dependencies() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    loaded, click_installed = done.stdout.split()
    assert loaded == "-", f"the remote route imported {loaded}"
    assert click_installed == "True"  # else this test proves nothing (uvicorn brings click)


def test_httpxs_cli_stays_importable_afterwards() -> None:
    probe = "import aidememo_cli._remote._http, httpx, sys; import httpx._main\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
