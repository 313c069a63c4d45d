from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo_ref import ManualClock, ReferenceLedger

START_MS = 1_767_225_600_123
TOKENS = {
    "codex-p1": ("writer-token-0123456789", "writer"),
    "codex-p2": ("receiver-token-0123456789", "writer"),
    "hermes": ("hermes-token-0123456789", "writer"),
    "reader_actor": ("reader-token-0123456789", "reader"),
}


class World:
    """A ledger provisioned like upstream's http_api.rs fixture, reached without a socket."""

    def __init__(self, path: Path | None, postgres_url: str | None = None, **options: Any) -> None:
        self.clock = ManualClock(START_MS)
        self.backend = "postgres" if postgres_url else "sqlite"
        self.postgres_url = postgres_url
        self.ledger = ReferenceLedger(path, postgres_url=postgres_url, clock=self.clock, **options)
        for actor, (token, role) in TOKENS.items():
            self.ledger.provision(tenant_id="tenant_http", project_id="project_http", actor_id=actor,
                                  token=token, role=role, project_epoch="epoch_http")
        self.http = httpx.Client(transport=self.ledger.transport(), base_url="http://ref")

    def call(self, actor: str | None, method: str, path: str, body: object = None, **kw: object) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})  # type: ignore[arg-type]
        if actor is not None:
            headers["Authorization"] = f"Bearer {TOKENS[actor][0]}"
        if body is not None:
            kw["json"] = body
        return self.http.request(method, path, headers=headers, **kw)  # type: ignore[arg-type]

    def p(self, suffix: str) -> str:
        return f"/v1/projects/project_http{suffix}"

    def session(self, actor: str = "codex-p1", sid: str = "session_remote", source: str | None = "project:aidememo") -> None:
        r = self.call(actor, "POST", self.p("/sessions"),
                      {"command_id": f"cs_{sid}", "payload": {"session_id": sid, "source_id": source, "topic": "T"}})
        assert r.status_code == 200, r.text

    def send(self, hid: str, to: str = "codex-p2", actor: str = "codex-p1", sid: str = "session_remote") -> None:
        r = self.call(actor, "POST", self.p("/handoffs"),
                      {"command_id": f"send_{hid}", "payload": {"handoff_id": hid, "session_id": sid, "to_actor": to}})
        assert r.status_code == 200, r.text

    def fact(self, fid: str, actor: str = "codex-p2", sid: str = "session_remote") -> None:
        r = self.call(actor, "POST", self.p("/facts"),
                      {"command_id": f"fact_{fid}", "payload": {"fact_id": fid, "session_id": sid, "content": "done"}})
        assert r.status_code == 200, r.text

    def transition(self, hid: str, op: str, rev: int, payload: dict[str, object], cid: str,
                   actor: str = "codex-p2") -> httpx.Response:
        return self.call(actor, "POST", self.p(f"/handoffs/{hid}/{op}"),
                         {"command_id": cid, "expected_revision": rev, "payload": payload})

    def status(self, hid: str, actor: str = "codex-p1") -> dict[str, object]:
        r = self.call(actor, "GET", self.p(f"/handoffs/{hid}"))
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """The same world on each storage backend: every route test runs on both."""
    if request.param == "postgres":
        w = World(None, request.getfixturevalue("postgres_url"))
    else:
        w = World(tmp_path / "ledger.sqlite")
    yield w
    w.http.close()
    w.ledger.close()


@pytest.fixture
def sqlite_world(tmp_path: Path) -> Iterator[World]:
    """For the tests that reach into the SQLite file itself."""
    w = World(tmp_path / "ledger.sqlite")
    yield w
    w.http.close()
    w.ledger.close()


def error_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]
