"""The CLI's recovery across a crash: an accept or return whose answers are lost, then a SIGKILL
and restart of the server, then the same CLI command again.

The reference runs as a process the test starts (``conformance.serve.ServedServer``, as a
``[serve]`` command runs it and a fault campaign kills it) behind the proxy that loses answers.
The proxy lets the CLI's POST and its one identical retry through and loses both answers, so the CLI ends in doubt; the server is
then killed and started again on the same database. The rerun finds the exact accept or return on
the server and answers ``recovered: true`` without a request that changes the handoff: the change
count stays what it was before the crash (AML-REM-4, through a restart).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aidememo_ref import ManualClock, ReferenceLedger
from conformance.serve import Served, ServedServer, ServeSpec, free_port
from tests.remote.conftest import _CLEAN_ENV, PROJECT, START_MS, TENANT, TOKENS, World
from tests.remote.proxy import DroppingProxy, dropping_proxy

REF = shutil.which("aidememo-ref", path=str(Path(sys.executable).parent)) or "aidememo-ref"


@pytest.fixture(name="crashable")
def crashable_world(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[World, ServedServer, DroppingProxy]]:
    for name in _CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    database = tmp_path / "ssot.sqlite"
    clock = ManualClock(START_MS)
    ledger = ReferenceLedger(database, clock=clock)
    for actor, (token, role) in TOKENS.items():
        ledger.provision(tenant_id=TENANT, project_id=PROJECT, actor_id=actor, token=token, role=role,
                         project_epoch="epoch_cli_remote")
    ledger.close()  # the served process owns the database from here
    spec = ServeSpec(command=(REF, "serve", "--database", str(database), "--bind", "127.0.0.1:{port}"),
                     base_dir=tmp_path)
    server = ServedServer(spec, url="http://127.0.0.1:{port}", served=Served(free_port(), str(tmp_path)),
                          log_path=tmp_path / "serve.log")
    with server:
        server.start()
        server.wait_ready()
        with dropping_proxy(server.url) as proxy:
            world = World(tmp_path, ledger, clock, proxy.url, capsys, monkeypatch)
            yield world, server, proxy
            world.http.close()


def _lost_then_crash(world: World, server: ServedServer, proxy: DroppingProxy, *argv: str) -> None:
    """``handoff --remote-profile codex-p2 ARGV`` with both answers of its transition lost, then a
    kill and restart."""
    verb = f"/{argv[0]}"
    drops = proxy.drop(lambda method, path: method == "POST" and path.endswith(verb), count=2)
    message = world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", *argv)
    assert message.startswith("internal error: remote server request failed: "), message
    assert len(drops.dropped) == 2  # the POST and its identical retry: both ran, neither was answered
    server.kill()
    server.restart()


def test_a_lost_accept_then_a_crash_is_recovered_by_the_rerun(
        crashable: tuple[World, ServedServer, DroppingProxy]) -> None:
    world, server, proxy = crashable
    handoff_id = world.send(world.session())["handoff_id"]
    _lost_then_crash(world, server, proxy, "accept", handoff_id)
    held = world.status(handoff_id)
    assert held["record"]["status"] == "accepted" and world.commits(handoff_id) == 2  # kept through the crash
    rerun = world.remote("codex-p2", "accept", handoff_id)
    assert rerun["recovered"] is True and rerun["receipt"] is None
    assert rerun["claim_id"] == held["record"]["claim_id"]
    assert world.status(handoff_id)["revision"] == held["revision"] and world.commits(handoff_id) == 2


def test_a_lost_return_then_a_crash_is_recovered_by_the_rerun(
        crashable: tuple[World, ServedServer, DroppingProxy]) -> None:
    world, server, proxy = crashable
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.remote("codex-p2", "accept", handoff_id)
    fact_id = world.result_fact(session_id)
    args = ("return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    _lost_then_crash(world, server, proxy, *args)
    held = world.status(handoff_id)
    assert held["record"]["status"] == "completed" and world.commits(handoff_id) == 3
    rerun = world.remote("codex-p2", *args)
    assert rerun["recovered"] is True and rerun["receipt"] is None
    assert world.status(handoff_id)["revision"] == held["revision"] and world.commits(handoff_id) == 3
