"""The remote route's start-up: what a remote read imports (bench/cli.py has the figures).

An ``http://`` profile's requests go over a plain socket, so a remote verb loads none of the
HTTP stacks (each costs about a local command or more to import), and a read loads neither the
outbox nor the receiver's store writes. The probe runs the real verb against the served reference and
lists the modules the process ended with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.remote.conftest import World

REPO = Path(__file__).resolve().parents[2]
# Heavy to import and not needed by a remote read over http://.
HEAVY = ("httpx", "httpcore", "h11", "anyio", "http.client", "email.parser", "ssl", "dataclasses", "inspect",
         "_hashlib", "aidememo_wire.shapes", "uvicorn", "aidememo_ref", "aidememo_cli._remote._outbox",
         "aidememo_cli._remote._send", "aidememo_cli._remote._receiver", "subprocess")


def loaded_by(world: World, *argv: str) -> tuple[str, list[str]]:
    """(stdout, the modules loaded) of ``aidememo-ref --store … ARGV`` in a fresh interpreter."""
    code = ("import json, sys; from aidememo_cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr); sys.exit(rc)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    env["HOME"] = str(world.home)
    done = subprocess.run([sys.executable, "-c", code, "--store", world.store("codex-p2"), *argv], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.splitlines()[-1])


def test_a_remote_read_loads_no_http_stack_and_no_write_machinery(world: World) -> None:
    session = world.session()
    handoff_id = world.send(session)["handoff_id"]
    out, loaded = loaded_by(world, "--json", "handoff", "--remote-profile", "codex-p2", "inbox")
    assert [entry["record"]["handoff_id"] for entry in json.loads(out)["assignments"]] == [handoff_id]
    assert "aidememo_client._plain" in loaded  # the probe really went through the plain wire
    assert [name for name in HEAVY if name in loaded] == []


def test_a_remote_write_still_loads_only_what_it_uses(world: World) -> None:
    session = world.session()
    handoff_id = world.send(session)["handoff_id"]
    out, loaded = loaded_by(world, "--json", "handoff", "--remote-profile", "codex-p2", "accept", handoff_id)
    assert json.loads(out)["handoff_id"] == handoff_id
    assert world.status(handoff_id)["record"]["status"] == "accepted"
    assert "aidememo_cli._remote._receiver" in loaded
    assert [name for name in ("httpx", "httpcore", "h11", "http.client", "ssl") if name in loaded] == []
