"""Two accounts on one real reference server, driven through the in-process CLI.

``world`` serves a fresh reference ledger over HTTP (uvicorn on a thread, a clock the test moves),
provisions ``codex-p1``, ``codex-p2``, ``hermes`` (writers) and ``reader``, and logs the three
writers in as named profiles in one ``HOME``, as upstream's own round-trip test does. Each
account has its own embedded store. ``world.proxied()`` re-points the profiles at a proxy that
can lose answers after the server applied them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo_ref import ManualClock, ReferenceLedger, serve_in_thread
from aidememo_cli._commands import main
from tests.local.conftest import Result
from tests.remote.proxy import DroppingProxy, dropping_proxy

TENANT = "tenant_cli_remote"
PROJECT = "project_cli_remote"
SOURCE = "project:aidememo"
START_MS = 1_767_225_600_000
TOKENS = {
    "codex-p1": ("codex-p1-token-0123456789", "writer"),
    "codex-p2": ("codex-p2-token-0123456789", "writer"),
    "hermes": ("hermes-token-0123456789", "writer"),
    "reader": ("reader-token-0123456789", "reader"),
}
_CLEAN_ENV = ("AIDEMEMO_STORE", "AIDEMEMO_SESSION_ID", "AIDEMEMO_SOURCE_ID", "AIDEMEMO_ACTOR_ID", "AIDEMEMO_NOW_MS",
              "AIDEMEMO_REMOTE_PROFILE", "AIDEMEMO_SOURCE_FROM_HERMES", "AIDEMEMO_ACTOR_FROM_HERMES_PROFILE",
              "HERMES_KANBAN_BOARD", "HERMES_KANBAN_TASK", "HERMES_TENANT", "HERMES_PROFILE", "CODEX_HOME")


class World:
    def __init__(self, root: Path, ledger: ReferenceLedger, clock: ManualClock, url: str,
                 capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.ledger = ledger
        self.clock = clock
        self.url = url
        self.home = root / "home"
        self.home.mkdir()
        self._capsys = capsys
        self._monkeypatch = monkeypatch
        self.http = httpx.Client(base_url=url, timeout=30)
        for name in ("codex-p1", "codex-p2", "hermes"):
            self.login(name)

    def store(self, account: str) -> str:
        return str(self.root / f"{account}.sqlite")

    # -- the CLI ---------------------------------------------------------------------------
    def run(self, account: str | None, *argv: str, env: dict[str, str] | None = None) -> Result:
        with self._monkeypatch.context() as patch:
            patch.setenv("HOME", str(self.home))
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            prefix = ["--store", self.store(account)] if account else ["--store", self.store("nobody")]
            rc = main([*prefix, *argv])
        out, err = self._capsys.readouterr()
        for token, _ in TOKENS.values():  # no token is ever printed, whatever the command
            assert token not in out and token not in err, f"{argv} printed a token"
        return Result(rc, out, err)

    def ok(self, account: str | None, *argv: str, env: dict[str, str] | None = None) -> Result:
        result = self.run(account, *argv, env=env)
        assert result.rc == 0, f"{argv}: rc={result.rc} {result.err}"
        return result

    def j(self, account: str | None, *argv: str, env: dict[str, str] | None = None) -> Any:
        return self.ok(account, "--json", *argv, env=env).json()

    def refused(self, account: str | None, *argv: str, env: dict[str, str] | None = None) -> str:
        result = self.run(account, *argv, env=env)
        assert result.rc == 1 and result.out == "", f"{argv} should be refused: {result}"
        lines = result.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.err
        return lines[0][len("Error: "):]

    def remote(self, account: str, *argv: str, env: dict[str, str] | None = None) -> Any:
        """``handoff --remote-profile ACCOUNT ...`` in ACCOUNT's store, as JSON."""
        return self.j(account, "handoff", "--remote-profile", account, *argv, env=env)

    def login(self, account: str, url: str | None = None) -> None:
        token = self.root / f"{account}.token"
        token.write_text(TOKENS[account][0] + "\n")
        self.ok(None, "auth", "login", url or self.url, "--profile", account, "--project-id", PROJECT,
                "--token-file", str(token))

    # -- the flow's first steps ------------------------------------------------------------
    def session(self, account: str = "codex-p1", topic: str = "Two remote Codex accounts") -> str:
        session_id: str = self.j(account, "session", "new", "--source-id", SOURCE, topic)["session_id"]
        self.ok(account, "fact", "add", "Keep the lease at two minutes", "--type", "decision", "--source-id", SOURCE,
                "--actor-id", account, "--session-id", session_id)
        return session_id

    def send(self, session_id: str, to: str = "codex-p2", sender: str = "codex-p1", **flags: str) -> Any:
        extra = [item for name, value in flags.items() for item in (f"--{name.replace('_', '-')}", value)]
        return self.remote(sender, "send", "--source-id", SOURCE, "--focus", "Review the remote boundary", *extra, to,
                           session_id)

    def result_fact(self, session_id: str, account: str = "codex-p2", content: str = "Remote review passed") -> str:
        fact_id: str = self.j(account, "fact", "add", content, "--type", "note", "--entities", "Release",
                              "--source-id", SOURCE, "--actor-id", account, "--session-id", session_id)["id"]
        return fact_id

    # -- the server, read directly ---------------------------------------------------------
    def get(self, account: str, path: str, **params: Any) -> httpx.Response:
        return self.http.get(f"/v1/projects/{PROJECT}{path}", params=params,
                             headers={"Authorization": f"Bearer {TOKENS[account][0]}"})

    def status(self, handoff_id: str, account: str = "codex-p1") -> dict[str, Any]:
        answer = self.get(account, f"/handoffs/{handoff_id}")
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()
        return data

    def changes(self, account: str = "codex-p1") -> list[dict[str, Any]]:
        epoch = self.get(account, "/identity").json()["project_epoch"]
        entries: list[dict[str, Any]] = self.get(account, "/changes", project_epoch=epoch, after_seq=0,
                                                 limit=1000).json()["entries"]
        return entries

    def commits(self, handoff_id: str) -> int:
        """How many writes the server committed to this handoff (send counts as one)."""
        return sum(e["resource"] == {"kind": "handoff", "id": handoff_id} for e in self.changes())

    def handoffs(self, account: str = "codex-p1") -> list[str]:
        page = self.get(account, "/handoffs", box="outbox", include_completed="true", limit=100).json()
        return [entry["record"]["handoff_id"] for entry in page["assignments"]]

    def proxied(self) -> Iterator[DroppingProxy]:
        with dropping_proxy(self.url) as proxy:
            for name in ("codex-p1", "codex-p2", "hermes"):
                self.login(name, proxy.url)
            yield proxy


@pytest.fixture
def world(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name in _CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    clock = ManualClock(START_MS)
    ledger = ReferenceLedger(tmp_path / "ssot.sqlite", clock=clock)
    for actor, (token, role) in TOKENS.items():
        ledger.provision(tenant_id=TENANT, project_id=PROJECT, actor_id=actor, token=token, role=role,
                         project_epoch="epoch_cli_remote")
    try:
        with serve_in_thread(ledger) as url:
            world = World(tmp_path, ledger, clock, url, capsys, monkeypatch)
            yield world
            world.http.close()
    finally:
        ledger.close()


@pytest.fixture
def proxy(world: World) -> Iterator[DroppingProxy]:
    yield from world.proxied()
