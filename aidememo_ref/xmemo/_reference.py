"""The XMemo reference as one object (storage, clock, service, ways to reach it), and key provisioning."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from .._clock import SystemClock
from ._errors import ProvisionError
from ._operations import Rules
from ._records import KNOWN_SCOPES, Principal, Tenant
from ._service import XMemoService, key_digest, new_uuid
from ._sqlite import SQLiteXMemoStore

__all__ = ["XMemoReference", "provision_key", "default_tenant", "MIN_KEY_CHARS", "DEFAULT_SCOPES"]

MIN_KEY_CHARS: Final = 24  # xmemo-agent-framework refuses shorter keys (capture gate 4)
MAX_KEY_CHARS: Final = 4_096
DEFAULT_SCOPES: Final = KNOWN_SCOPES
_OWNER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,119}\Z")
_TENANT_PART: Final = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")  # MAF's project grammar, for all three parts
_AGENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}\Z")


def default_tenant(owner_id: str, organization_id: str | None = None, workspace_id: str | None = None,
                   project_id: str | None = None) -> Tenant:
    """The owner's tenant; parts not given default to ``org-<owner>``, ``ws-<owner>``, ``<owner>``."""
    return Tenant(owner_id=owner_id, organization_id=organization_id or f"org-{owner_id}",
                  workspace_id=workspace_id or f"ws-{owner_id}", project_id=project_id or owner_id)


def _key_problem(key: str) -> str | None:
    if len(key) < MIN_KEY_CHARS:
        return f"key must be at least {MIN_KEY_CHARS} characters (xmemo-agent-framework refuses shorter keys)"
    if len(key) > MAX_KEY_CHARS:
        return f"key must be at most {MAX_KEY_CHARS} characters"
    if not key.isascii() or any(not 0x20 < ord(ch) < 0x7F for ch in key):
        return "key must be visible ASCII without whitespace or control characters"
    return None


def _principal(*, owner_id: str, scopes: tuple[str, ...] | list[str], agent_id: str | None,
               organization_id: str | None, workspace_id: str | None, project_id: str | None) -> Principal:
    if not _OWNER.match(owner_id):
        raise ProvisionError("invalid owner id: use 1 to 120 ASCII letters, digits, '-' or '_', starting alphanumeric")
    for label, value in (("organization id", organization_id), ("workspace id", workspace_id),
                         ("project id", project_id)):
        if value is not None and not _TENANT_PART.match(value):
            raise ProvisionError(f"invalid {label}: use 1 to 128 ASCII letters, digits, '-' or '_'")
    if agent_id is not None and not _AGENT.match(agent_id):
        raise ProvisionError("invalid agent id: use 1 to 128 visible ASCII characters (letters, digits, ._:@/-)")
    chosen = tuple(dict.fromkeys(s.strip() for s in scopes if s.strip()))
    if not chosen:
        raise ProvisionError("scopes must name memory:read and/or memory:write")
    unknown = [s for s in chosen if s not in KNOWN_SCOPES]
    if unknown:
        raise ProvisionError(f"unknown scope {unknown[0]}: scopes are memory:read and memory:write")
    ordered = tuple(s for s in KNOWN_SCOPES if s in chosen)
    return Principal(tenant=default_tenant(owner_id, organization_id, workspace_id, project_id), scopes=ordered,
                     bound_agent_id=agent_id)


class XMemoReference:
    """The XMemo reference server, without a socket.

    Args:
        database: SQLite file (created with its schema if missing); references in several
            threads or processes may share it.
        clock: object with ``now_ms()``; defaults to the wall clock.
        rules: replacement rule functions (the kit's broken variants).
        store_class: the storage class (broken variants subclass ``SQLiteXMemoStore``).
        scheduler: object with ``point(name)``, called at write-transaction boundaries.
        new_id: source of memory, session and audit ids (UUIDs by default).
    """

    def __init__(self, database: str | Path, *, clock: Any = None, rules: Rules | None = None,
                 store_class: type[SQLiteXMemoStore] = SQLiteXMemoStore, scheduler: Any = None,
                 busy_timeout_ms: int = 5_000, new_id: Any = new_uuid) -> None:
        self.database = str(database)
        self.clock = clock if clock is not None else SystemClock()
        self.store = store_class(database, scheduler=scheduler, busy_timeout_ms=busy_timeout_ms)
        self.service = XMemoService(self.store, self.clock, rules=rules, new_id=new_id)

    def handle(self, method: str, target: str, headers: Any = (), body: bytes = b"") -> Any:
        """Answer one HTTP request given as method, raw target, header pairs and body bytes."""
        pairs = [(k.encode("latin-1"), v.encode("latin-1"))
                 for k, v in (headers.items() if isinstance(headers, dict) else headers)]
        return self.service.handle(method, target, pairs, body)

    def provision(self, *, owner_id: str, key: str, scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES,
                  agent_id: str | None = None, organization_id: str | None = None,
                  workspace_id: str | None = None, project_id: str | None = None) -> Principal:
        """Bind ``key`` to an owner's tenant (see ``provision_key``); returns the principal."""
        return _provision(self.store, self.clock.now_ms(), owner_id=owner_id, key=key, scopes=scopes,
                          agent_id=agent_id, organization_id=organization_id, workspace_id=workspace_id,
                          project_id=project_id)[0]

    @property
    def asgi(self) -> Any:
        from .._asgi import create_asgi

        return create_asgi(self.service)

    def transport(self) -> Any:
        """An httpx transport answering in-process through this reference (no socket)."""
        from .._transport import LedgerTransport

        return LedgerTransport(self.service)

    def close(self) -> None:
        self.store.close()


def _provision(store: SQLiteXMemoStore, now_ms: int, *, owner_id: str, key: str, scopes: tuple[str, ...] | list[str],
               agent_id: str | None, organization_id: str | None, workspace_id: str | None,
               project_id: str | None) -> tuple[Principal, bool]:
    principal = _principal(owner_id=owner_id, scopes=scopes, agent_id=agent_id, organization_id=organization_id,
                           workspace_id=workspace_id, project_id=project_id)
    if (problem := _key_problem(key)) is not None:
        raise ProvisionError(problem)
    created = store.provision(key_digest=key_digest(key), principal=principal, now_ms=now_ms)
    return principal, created


def provision_key(database: str | Path, *, owner_id: str, key: str,
                  scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES, agent_id: str | None = None,
                  organization_id: str | None = None, workspace_id: str | None = None,
                  project_id: str | None = None) -> tuple[Principal, bool]:
    """Do what ``aidememo-ref xmemo bootstrap`` does; returns (principal, newly bound).

    Re-running with the same arguments changes nothing; the same key with any other owner,
    tenant, scope set or agent is refused with ``ProvisionError``, as is a key shorter than 24
    characters.
    """
    store = SQLiteXMemoStore(database)
    try:
        return _provision(store, SystemClock().now_ms(), owner_id=owner_id, key=key, scopes=scopes,
                          agent_id=agent_id, organization_id=organization_id, workspace_id=workspace_id,
                          project_id=project_id)
    finally:
        store.close()
