"""Two accounts of one remote project, driven through the CLI under test (the ``remote`` capability).

The handoff guide's second half: ``codex-p1`` and ``codex-p2`` are different authenticated actors
on one server, each with a named credential profile (``auth login``) and an embedded store of its
own. The server is this kit's reference, started once per pytest process on loopback the first
time a remote check runs; each check gets a project of its own, two freshly minted tokens in 0600
files (never on a command line, so never in a transcript) and a ``HOME`` of its own (where
upstream keeps ``auth.json`` and the durable send outbox). The checks judge what the CLI prints
and exits with, and what the server then holds.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance.errors import Departure, ShapeError, TargetError, Untestable
from conformance.process import CommandExchange

__all__ = ["RemoteServer", "TwoAccounts", "AccountsWorld", "REMOTE_SOURCE", "P1", "P2"]

TENANT = "conformance"
REMOTE_SOURCE = "project:aidememo"  # the guide's source
P1, P2 = "codex-p1", "codex-p2"  # the guide's accounts: profile name = actor id


@dataclass(slots=True)
class RemoteServer:
    """The kit's reference server on loopback, for the CLI under test to talk to."""

    url: str
    _ledger: Any
    _stack: ExitStack
    _workdir: str
    _http: Any = None
    _opening: threading.Lock = field(default_factory=threading.Lock)  # checks run in threads

    def provision(self, project: str, actor: str, token: str) -> None:
        self._ledger.provision(tenant_id=TENANT, project_id=project, actor_id=actor, token=token, role="writer")

    def get(self, path: str, token: str, params: Mapping[str, Any]) -> Any:
        """The server's answer to one GET, read directly (beside the CLI under test)."""
        with self._opening:
            if self._http is None:
                import httpx

                # One client for the run, over plain HTTP: a client per read loaded the CA bundle
                # each time (a fifth of a second apiece on a loaded machine), for a loopback URL.
                self._http = httpx.Client(base_url=self.url, transport=httpx.HTTPTransport(verify=False), timeout=30)
                self._stack.callback(self._http.close)
        return self._http.get(path, params=dict(params), headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._stack.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


def start_server() -> RemoteServer:
    """Raises TargetError when the reference cannot start (the remote checks are then untestable)."""
    from aidememo_ref import ReferenceLedger, serve_in_thread

    workdir = tempfile.mkdtemp(prefix="aidememo-remote-")
    stack = ExitStack()
    try:
        ledger = ReferenceLedger(os.path.join(workdir, "ssot.sqlite"))
        stack.callback(ledger.close)
        url = stack.enter_context(serve_in_thread(ledger))
    except (RuntimeError, OSError) as exc:
        stack.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise TargetError(f"the reference server for the remote checks did not start: {exc}") from None
    return RemoteServer(url=url, _ledger=ledger, _stack=stack, _workdir=workdir)


class _ServerHost(Protocol):
    root: str

    def remote_server(self) -> RemoteServer: ...


class AccountsWorld(Protocol):
    """What ``TwoAccounts`` needs of a check's world (``LocalWorld`` is one): its target, fresh
    ids and texts, and CLI runs."""

    @property
    def target(self) -> _ServerHost: ...

    def new_id(self, prefix: str) -> str: ...

    def text(self, what: str) -> str: ...

    def run(self, *words: str, env: Mapping[str, str] | None = None, stdin: bytes = b"",
            actor: str | None = None, store: str | None = None) -> CommandExchange: ...


@dataclass(slots=True)
class TwoAccounts:
    """One check's two remote accounts: the profiles, their stores and the server's view."""

    world: AccountsWorld
    server: RemoteServer
    project: str
    home: str
    _tokens: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, world: AccountsWorld) -> TwoAccounts:
        server = world.target.remote_server()
        home = os.path.join(world.target.root, world.new_id("home"))
        os.makedirs(os.path.join(home, ".config", "aidememo"))
        accounts = cls(world=world, server=server, project=world.new_id("project"), home=home)
        for actor in (P1, P2):
            token = secrets.token_hex(32)
            server.provision(accounts.project, actor, token)
            accounts._tokens[actor] = token
            path = accounts.token_file(actor)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                handle.write(token + "\n")
        return accounts

    def token_file(self, actor: str) -> str:
        return os.path.join(self.home, ".config", "aidememo", f"{actor}.token")

    def store(self, account: str) -> str:
        return os.path.join(self.home, f"{account}.sqlite")

    # -- the CLI under test -------------------------------------------------------------------
    def run(self, account: str, *words: str, env: dict[str, str] | None = None) -> CommandExchange:
        done = self.world.run(*words, env={"HOME": self.home, **(env or {})}, store=self.store(account), actor=account)
        printed = done.stdout + done.stderr
        for token in self._tokens.values():  # never printed, whatever the command
            assert token.encode() not in printed, f"`{' '.join(words)}` printed a bearer token"
        return done

    def json(self, account: str, *words: str) -> Any:
        """A step of the flow under test: it must succeed with JSON on stdout (else the check fails)."""
        done = self.run(account, "--json", *words)
        expected = done.expect("exit 0 with JSON on stdout")
        if done.exit_code != 0:
            raise Departure(f"`{' '.join(words)}` exited {done.exit_code}: "
                            f"{done.stderr.decode(errors='replace').strip()}", entry=done, expected=expected)
        return done.json()

    def remote(self, account: str, *words: str) -> Any:
        """``handoff --remote-profile ACCOUNT WORDS...`` in ACCOUNT's store."""
        return self.json(account, "handoff", "--remote-profile", account, *words)

    def login(self, *accounts: str) -> None:
        for account in accounts or (P1, P2):
            done = self.run(account, "auth", "login", self.server.url, "--profile", account, "--project-id",
                            self.project, "--token-file", self.token_file(account))
            assert done.exit_code == 0, f"auth login {account}: {done.stderr.decode(errors='replace').strip()}"

    # -- the flow's first steps -----------------------------------------------------------------
    def session(self, account: str = P1) -> str:
        """A tracked session in ACCOUNT's store, in the guide's source, with one decision in it."""
        answer = self._setup(account, "session", "new", "--source-id", REMOTE_SOURCE, self.world.text("topic"))
        session_id: str = answer["session_id"]
        self._setup(account, "fact", "add", self.world.text("decision"), "--type", "decision", "--source-id",
                    REMOTE_SOURCE, "--actor-id", account, env={"AIDEMEMO_SESSION_ID": session_id})
        return session_id

    def send(self, session_id: str, focus: str = "Review the remote boundary") -> Any:
        return self.remote(P1, "send", P2, "--source-id", REMOTE_SOURCE, "--focus", focus, session_id)

    def result_fact(self, session_id: str, account: str = P2) -> str:
        # Attached the way the guide's receiver attaches it: the session exported by the accept.
        fact_id: str = self._setup(account, "fact", "add", self.world.text("evidence"), "--type", "note",
                                   "--source-id", REMOTE_SOURCE, "--actor-id", account,
                                   env={"AIDEMEMO_SESSION_ID": session_id})["id"]
        return fact_id

    def _setup(self, account: str, *words: str, env: dict[str, str] | None = None) -> Any:
        # The local surface is judged by the core checks; here it only prepares the remote flow.
        done = self.run(account, "--json", *words, env=env)
        if done.exit_code != 0:
            raise Untestable(f"`{' '.join(words)}` exited {done.exit_code}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        try:
            return done.json()
        except ShapeError as exc:
            raise Untestable(f"setup step: {exc}") from None

    # -- the server, read directly ------------------------------------------------------------
    def server_get(self, path: str, **params: Any) -> Any:
        answer = self.server.get(f"/v1/projects/{self.project}{path}", self._tokens[P1], params)
        if answer.status_code != 200:
            raise Untestable(f"the reference server answered {answer.status_code} to GET {path}")
        return answer.json()

    def handoffs(self) -> list[str]:
        """Every handoff of the project (the sender's outbox on the server, completed included)."""
        page = self.server_get("/handoffs", box="outbox", include_completed="true", limit=100)
        return [entry["record"]["handoff_id"] for entry in page["assignments"]]

    def commits(self, handoff_id: str) -> int:
        """How many writes the server committed to this handoff (its send counts as one)."""
        epoch = self.server_get("/identity")["project_epoch"]
        entries = self.server_get("/changes", project_epoch=epoch, after_seq=0, limit=1000)["entries"]
        return sum(entry["resource"] == {"kind": "handoff", "id": handoff_id} for entry in entries)

    def record(self, handoff_id: str) -> dict[str, Any]:
        record: dict[str, Any] = self.server_get(f"/handoffs/{handoff_id}")["record"]
        return record
