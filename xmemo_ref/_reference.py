"""The XMemo reference as one object: storage, clock and service; ``Served`` gives the ways to reach it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refkit.clock import SystemClock
from refkit.served import Served
from refkit.sqlitefile import BUSY_TIMEOUT_MS
from ._operations import Rules
from ._provision import DEFAULT_SCOPES, provision_store
from ._records import Principal
from ._service import XMemoService, new_uuid
from ._sqlite import SQLiteXMemoStore

__all__ = ["XMemoReference"]


class XMemoReference(Served):
    """The XMemo reference server, without a socket (``service.handle`` answers one request).

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
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS, new_id: Any = new_uuid) -> None:
        self.database = str(database)
        self.clock = clock if clock is not None else SystemClock()
        self.store: SQLiteXMemoStore = store_class(database, scheduler=scheduler, busy_timeout_ms=busy_timeout_ms)
        self.service = XMemoService(self.store, self.clock, rules=rules, new_id=new_id)

    def provision(self, *, owner_id: str, key: str, scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES,
                  agent_id: str | None = None, organization_id: str | None = None,
                  workspace_id: str | None = None, project_id: str | None = None) -> Principal:
        """Bind ``key`` to an owner's tenant (see ``provision_key``); returns the principal."""
        return provision_store(self.store, self.clock.now_ms(), owner_id=owner_id, key=key, scopes=scopes,
                               agent_id=agent_id, organization_id=organization_id, workspace_id=workspace_id,
                               project_id=project_id)[0]
