"""The local command line's import graph: what a local command loads at start-up.

Agents start ``aidememo-ref`` dozens of times per task, and start-up is mostly imports
(``bench/cli.py`` times it against ``python -c pass``). These tests pin the graph, not a time:
a local command or the stdio MCP server loads the local flow and nothing of the remote core,
the servers, their HTTP stack or the heavy standard-library modules it does not use. When one
fails, ``python -X importtime -m aidememo_ref ...`` shows who imported the module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local import _memory as memory
from aidememo_cli._local._store import LocalStore
from tests.startup_probe import BARE, COMMAND, KIT

# The kit's modules a local command may load: the local flow, its command line and MCP
# server, and the few small modules it shares with the rest of the kit. Nothing of the server
# package (aidememo_ref), the client or the XMemo reference.
_LOCAL_PREFIXES = ("aidememo_cli._local", "aidememo_cli._commands", "aidememo_cli._mcp")
_SHARED = {"aidememo_cli", "refkit", "refkit.args", "refkit.errors", "refkit.records", "refkit.ulid", "refkit.version",
           "aidememo_wire", "aidememo_wire.status"}

# Modules no local command needs. The servers' stack; dataclasses (with inspect) because
# defining dataclasses was most of a start (the local flow's values are NamedTuples); shutil,
# which argparse imports for the terminal width; importlib.metadata, which would read the
# installed version from disk; decimal, which only the remote core's canonical JSON needs.
_NEVER = ("httpx", "uvicorn", "psycopg", "psycopg_pool", "jsonschema", "asyncio", "ssl", "dataclasses",
          "inspect", "shutil", "importlib.metadata", "email", "decimal", "zipfile", "tempfile")

SOURCE = "startup-team"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(a store with one session and one pending handoff to ``bob``, the session, the handoff)."""
    path = tmp_path_factory.mktemp("startup") / "local.sqlite"
    local = LocalStore(str(path))
    with local.transaction(write=True):
        session = memory.session_new(local, "start-up", SOURCE, 1_700_000_000_000)
        memory.add_fact(local, content="the plan", fact_type=None, entities=[], tags=(), source_id=SOURCE,
                        actor_id="alice", now_ms=1_700_000_000_001, session=session)
        record = assignments.dispatch(local, assignments.NewAssignment(
            session_id=session.name, source_id=SOURCE, from_actor="alice", to_actor="bob", focus="check"),
            1_700_000_000_002)
    local.close()
    return path, session.name, record.handoff_id


# A bare interpreter in the same environment: its site hooks (.pth files of the installed
# packages) may load modules of their own, which are no command's doing.


def _run(tmp_path: Path, program: str, argv: list[str], stdin: str) -> set[str]:
    listing = tmp_path / "modules.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    done = subprocess.run([sys.executable, "-c", program, str(listing), *argv], input=stdin, env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return set(listing.read_text().split())


def _loaded(tmp_path: Path, argv: list[str], stdin: str = "") -> set[str]:
    """The modules the command loaded beyond those a bare interpreter had already loaded."""
    return _run(tmp_path, COMMAND, argv, stdin) - _run(tmp_path, BARE, [], "")


def _check(modules: set[str], *, extra_never: tuple[str, ...] = ()) -> None:
    kit = {m for m in modules if m.split(".")[0] in KIT}
    foreign = sorted(m for m in kit if m not in _SHARED and not m.startswith(_LOCAL_PREFIXES))
    assert not foreign, f"a local command loaded modules outside the local flow: {foreign}"
    heavy = sorted(m for m in modules if m.split(".")[0] in _NEVER + extra_never or m in _NEVER)
    assert not heavy, f"a local command loaded modules it does not need: {heavy}"


def test_a_read_loads_only_the_local_flow(store: tuple[Path, str, str], tmp_path: Path) -> None:
    path, _, _ = store
    modules = _loaded(tmp_path, ["--store", str(path), "handoff", "inbox", "--actor-id", "bob"])
    assert "aidememo_cli._local._store" in modules  # the probe saw the command run
    _check(modules, extra_never=("hashlib",))  # only writes hash fact content


def test_fact_add_and_accept_load_only_the_local_flow(store: tuple[Path, str, str], tmp_path: Path) -> None:
    path, session, handoff = store
    _check(_loaded(tmp_path, ["--store", str(path), "fact", "add", "a finding", "--source-id", SOURCE,
                              "--actor-id", "bob", "--session-id", session]))
    _check(_loaded(tmp_path, ["--store", str(path), "--json", "handoff", "accept", handoff, "--actor-id", "bob"]))


def test_the_stdio_mcp_server_loads_only_the_local_flow(store: tuple[Path, str, str], tmp_path: Path) -> None:
    path, _, _ = store
    requests = (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n'
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"aidememo_handoff_inbox",'
        f'"arguments":{{"action":"list","actor_id":"bob","source_id":"{SOURCE}"}}}}}}\n'
    )
    modules = _loaded(tmp_path, ["--store", str(path), "mcp"], stdin=requests)
    assert "aidememo_cli._mcp._local" in modules
    _check(modules, extra_never=("hashlib",))


def test_the_guard_names_what_it_refuses() -> None:
    with pytest.raises(AssertionError, match=r"outside the local flow: \['aidememo_ref', 'aidememo_ref._records'\]"):
        _check({"aidememo_ref", "aidememo_cli._local._store", "aidememo_ref._records"})
    with pytest.raises(AssertionError, match=r"outside the local flow: \['aidememo_cli._remote._http'\]"):
        _check({"aidememo_cli", "aidememo_cli._local._store", "aidememo_cli._remote._http"})
    with pytest.raises(AssertionError, match=r"does not need: \['dataclasses', 'httpx._client'\]"):
        _check({"aidememo_cli", "dataclasses", "httpx._client", "json"})
    with pytest.raises(AssertionError, match=r"does not need: \['hashlib'\]"):
        _check({"hashlib"}, extra_never=("hashlib",))
