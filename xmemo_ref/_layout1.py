"""Table layout 1 to 2, in place, inside the store's opening transaction.

Layout 1 kept one ``memories`` row per memory, updated in place (``seq`` its first-written order),
and the idempotency answers in a table of their own. Layout 2's log gets, in this order, every
stored answer (as a replay-only row: it shows its memory as it was when answered) and then every
memory as it is now, in ``seq`` order, so memory folds to the same memories, first-written order
and replays. The rows are folded once before anything is dropped: a file the store could not open
afterwards is refused with the old tables left as they were (the transaction rolls back).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from ._codec import memory_json
from ._errors import StoreError
from ._log import APPEND_ANY, LAYOUT_VERSION, LOG, fold
from ._records import Kind, Memory, MemoryType, Tenant, Trust
from ._state import StoreState

__all__ = ["upgrade"]

_TABLES: Final = frozenset({"api_keys", "mcp_sessions", "memories", "idempotency"})
_COLUMNS: Final = (
    "owner_id, organization_id, workspace_id, project_id, id, kind, content, path, bucket, scope, team_id, "
    "memory_type, status, importance, confidence, semantic_key, state_key, event_type, session_id, source, agent_id, "
    "agent_instance_id_hash, agent_trust, metadata, version, created_at_ms, updated_at_ms, expires_at_ms"
)
_ANSWERS: Final = ("SELECT owner_id, organization_id, workspace_id, project_id, idempotency_key, fingerprint, answer "
                   "FROM idempotency ORDER BY owner_id, organization_id, workspace_id, project_id, idempotency_key")


def _memory(row: Any) -> tuple[Tenant, Memory]:
    (owner, organization, workspace, project, mid, kind, content, path, bucket, scope, team_id, memory_type, status,
     importance, confidence, semantic_key, state_key, event_type, session_id, source, agent_id, instance, trust,
     metadata, version, created, updated, expires) = row
    tenant = Tenant(owner_id=owner, organization_id=organization, workspace_id=workspace, project_id=project)
    return tenant, Memory(
        id=mid, tenant=tenant, kind=Kind(kind), content=content, path=path, bucket=bucket, scope=scope,
        team_id=team_id, memory_type=MemoryType(memory_type), status=status, importance=importance,
        confidence=confidence, semantic_key=semantic_key, state_key=state_key, event_type=event_type,
        session_id=session_id, source=source, agent_id=agent_id, agent_instance_id_hash=instance,
        agent_trust=Trust(trust), metadata_json=metadata, version=version, created_at_ms=created,
        updated_at_ms=updated, expires_at_ms=expires,
    )


def upgrade(conn: sqlite3.Connection, path: str, tables: set[str]) -> None:
    """Layout 1 to 2 (see the module docstring); StoreError, with nothing changed, when it cannot be."""
    if not _TABLES <= tables:
        raise StoreError(f"{path} is not an XMemo reference file (a memories table without the reference's "
                         "other tables); start from a new database file")
    rows: list[tuple[Any, ...]] = []
    for owner, organization, workspace, project, key, fingerprint, answer in conn.execute(_ANSWERS):
        rows.append((len(rows) + 1, owner, organization, workspace, project, answer, key, fingerprint, 1))
    try:
        for row in conn.execute(f"SELECT {_COLUMNS} FROM memories ORDER BY seq"):
            tenant, memory = _memory(row)
            shown = json.dumps(memory_json(memory), ensure_ascii=False, separators=(",", ":"))
            rows.append((len(rows) + 1, *row[:4], shown, None, None, None))
        probe = StoreState()
        for values in rows:
            fold(probe, values)
    except (ValueError, TypeError) as exc:
        raise StoreError(f"{path} cannot be upgraded from table layout 1: {exc}") from exc
    conn.execute(LOG)
    conn.executemany(APPEND_ANY, rows)
    conn.execute("DROP TABLE memories")  # its indexes go with it
    conn.execute("DROP TABLE idempotency")
    conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
