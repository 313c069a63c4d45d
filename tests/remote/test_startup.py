"""The remote route's start-up: httpx without its command-line client (bench/cli.py has the figures)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib.util, sys
import aidememo_cli._commands.remote
loaded = sorted(name for name in ("click", "pygments", "rich", "httpx._main") if name in sys.modules)
print(",".join(loaded) or "-", importlib.util.find_spec("click") is not None)
"""


def test_the_remote_route_never_loads_httpxs_cli_dependencies() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    loaded, click_installed = done.stdout.split()
    assert loaded == "-", f"the remote route imported {loaded}"
    assert click_installed == "True"  # else this test proves nothing (uvicorn brings click)


def test_httpxs_cli_stays_importable_afterwards() -> None:
    probe = "import aidememo_cli._remote._http, httpx, sys; import httpx._main\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    # httpx._main needs rich, which the kit does not install: the real import ran and said so.
    assert "halted; None in sys.modules" not in done.stderr, done.stderr
