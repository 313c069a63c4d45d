"""The XMemo store's log (table layout 2): its table, its statements, and how a row is folded.

Each row is one capture: its tenant, its answer (which shows the memory as the capture left it:
``_codec``) and, when it came with one, its idempotency key and request fingerprint.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ._codec import memory_from_json
from ._state import Replay, StoreState
from ._writes import Outcome

__all__ = ["LAYOUT_VERSION", "LOG", "APPEND", "APPEND_KEYED", "APPEND_ANY", "TAIL", "fold"]

LAYOUT_VERSION: Final = 2  # PRAGMA user_version; layout 1 (user_version 0 with a memories table) is upgraded
# ``n`` is the rowid: commit order, the order memory folds rows in. ``replay_only`` marks an answer
# carried over from layout 1, which shows its memory as it was then and so changes no memory.
LOG: Final = """
CREATE TABLE IF NOT EXISTS log(
  n INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, organization_id TEXT NOT NULL, workspace_id TEXT NOT NULL,
  project_id TEXT NOT NULL, answer TEXT NOT NULL, idempotency_key TEXT, fingerprint TEXT, replay_only INTEGER)
"""
_TENANT_COLUMNS: Final = "n, owner_id, organization_id, workspace_id, project_id, answer"
# Two statements so that a row's empty fields are left to the column default rather than bound
# (sqlite3 binds None through its adapter lookup, which costs more than a value).
APPEND: Final = f"INSERT INTO log({_TENANT_COLUMNS}) VALUES (?,?,?,?,?,?)"
APPEND_KEYED: Final = f"INSERT INTO log({_TENANT_COLUMNS}, idempotency_key, fingerprint) VALUES (?,?,?,?,?,?,?,?)"
APPEND_ANY: Final = (f"INSERT INTO log({_TENANT_COLUMNS}, idempotency_key, fingerprint, replay_only) "
                     f"VALUES ({','.join('?' * 9)})")
TAIL: Final = f"SELECT {_TENANT_COLUMNS}, idempotency_key, fingerprint, replay_only FROM log WHERE n>? ORDER BY n"


def fold(state: StoreState, row: tuple[Any, ...]) -> None:
    """Apply one log row read from the file; ValueError when it cannot be (memory unchanged)."""
    n, owner, organization, workspace, project, answer, key, fingerprint, replay_only = row
    tenant = state.known(owner, organization, workspace, project)
    memory = None
    if not replay_only:
        try:
            value = json.loads(answer)
            if value.get("write") != Outcome.UNCHANGED.value:
                memory = memory_from_json(tenant, value)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"log row {n} does not show a memory: {exc!r}") from exc
    state.apply(n, tenant, memory, None if key is None else (key, Replay(fingerprint, answer)))
