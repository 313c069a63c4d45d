from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo_ref import ManualClock
from xmemo_ref import XMemoReference

START_MS = 1_767_225_600_000

# name -> (key, provision keyword arguments)
KEYS: dict[str, tuple[str, dict[str, Any]]] = {
    "shared": ("xm-shared-key-0123456789abcdef", {"owner_id": "acme"}),
    "claude": ("xm-claude-key-0123456789abcdef", {"owner_id": "acme", "agent_id": "claude"}),
    "codex": ("xm-codex-key-0123456789abcdefg", {"owner_id": "acme", "agent_id": "codex"}),
    "reader": ("xm-reader-key-0123456789abcdef", {"owner_id": "acme", "scopes": ["memory:read"]}),
    "writer": ("xm-writer-key-0123456789abcdef", {"owner_id": "acme", "scopes": ["memory:write"]}),
    "globex": ("xm-globex-key-0123456789abcdef", {"owner_id": "globex"}),
    "acme-other-project": ("xm-acme-proj2-0123456789abcdef", {"owner_id": "acme", "project_id": "side-project"}),
}


class World:
    """One XMemo reference on a temporary file, reached without a socket, with a manual clock."""

    def __init__(self, path: Path, *, template: Path | None = None, **kwargs: Any) -> None:
        if template is not None:  # a copy of an already provisioned file: much cheaper than provisioning
            shutil.copyfile(template, path)
        self.clock = ManualClock(START_MS)
        self.ref = XMemoReference(path, clock=self.clock, **kwargs)
        if template is None:
            for key, options in KEYS.values():
                self.ref.provision(key=key, **options)
        self.http = httpx.Client(transport=self.ref.transport(), base_url="http://xmemo.test")

    def headers(self, who: str | None, agent: str | None = None, instance: str | None = None,
                bearer: bool = False) -> dict[str, str]:
        headers: dict[str, str] = {}
        if who is not None:
            key = KEYS[who][0]
            headers["Authorization" if bearer else "X-API-Key"] = f"Bearer {key}" if bearer else key
        if agent is not None:
            headers["X-Memory-OS-Agent-ID"] = agent
        if instance is not None:
            headers["X-Memory-OS-Agent-Instance-ID"] = instance
        return headers

    def call(self, who: str | None, method: str, path: str, body: object = None, *, agent: str | None = None,
             instance: str | None = None, bearer: bool = False, headers: dict[str, str] | None = None,
             **kw: Any) -> httpx.Response:
        sent = self.headers(who, agent, instance, bearer) | (headers or {})
        if body is not None:
            kw["json"] = body
        return self.http.request(method, path, headers=sent, **kw)

    def remember(self, who: str, content: str, *, agent: str | None = None, instance: str | None = None,
                 **fields: Any) -> dict[str, Any]:
        body = {"content": content, "path": fields.pop("path", "notes"), **fields}
        response = self.call(who, "POST", "/v1/remember", body, agent=agent, instance=instance)
        assert response.status_code == 200, response.text
        self.clock.advance(1_000)
        return response.json()  # type: ignore[no-any-return]

    def recall(self, who: str, query: str = "anything", *, agent: str | None = None, instance: str | None = None,
               **fields: Any) -> dict[str, Any]:
        response = self.call(who, "POST", "/v1/recall/context", {"query": query, **fields}, agent=agent,
                             instance=instance)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def count(self, who: str) -> int:
        """Rows stored for ``who``'s tenant, read from the store (not through the API under test)."""
        from xmemo_ref._keys import key_digest

        principal = self.ref.store.principal(key_digest(KEYS[who][0]))
        assert principal is not None
        return self.ref.store.count(principal.tenant)

    def close(self) -> None:
        self.http.close()
        self.ref.close()


@pytest.fixture(scope="session")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database file with every key of ``KEYS`` bound, closed (so the file alone is complete)."""
    path = tmp_path_factory.mktemp("xmemo-template") / "xmemo.sqlite"
    World(path).close()
    return path


@pytest.fixture
def world(tmp_path: Path, provisioned: Path) -> Iterator[World]:
    w = World(tmp_path / "xmemo.sqlite", template=provisioned)
    yield w
    w.close()


def key(name: str) -> str:
    return KEYS[name][0]
