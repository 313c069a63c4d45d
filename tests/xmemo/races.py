"""Planted concurrency bugs in the XMemo reference, for the simulator's tests (and ``--ledger`` style replays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidememo_ref.xmemo import Rules, XMemoReference
from aidememo_ref.xmemo._recall import pack
from aidememo_ref.xmemo._sqlite import SQLiteXMemoStore, _Existing


class CheckThenActStore(SQLiteXMemoStore):
    """Looks the idempotency key up before taking the write lock, and records answers with INSERT OR REPLACE.

    Two replays of one key that both look before either writes both miss, and both write: two
    memories for one key. The correct store looks inside its write transaction.
    """

    def write(self, tenant: Any, *, idempotency: Any, plan: Any) -> tuple[str, bool]:
        if idempotency is not None:
            with self._transaction("DEFERRED") as conn:
                replay = self._replay(conn, tenant, idempotency)
            if replay is not None:
                return replay, True
            self._point("checked")
        with self._transaction("IMMEDIATE") as conn:
            self._point("begin")
            decision, answer = plan(_Existing(conn, tenant))
            self._apply(conn, tenant, decision.outcome, decision.memory)
            if idempotency is not None:
                conn.execute(
                    "INSERT OR REPLACE INTO idempotency(owner_id, organization_id, workspace_id, project_id, "
                    "idempotency_key, fingerprint, answer) VALUES (?,?,?,?,?,?,?)",
                    (tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id,
                     idempotency.key, idempotency.fingerprint, answer))
            self._point("commit")
        return answer, False


def check_then_act(database: Path, *, clock: Any, scheduler: Any, new_id: Any) -> XMemoReference:
    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id, store_class=CheckThenActStore)


def one_item_too_many(ranked: Any, *, max_items: int, max_tokens: int, boundary_of: Any) -> Any:
    return pack(ranked, max_items=max_items + 1, max_tokens=max_tokens, boundary_of=boundary_of)


def unbounded_items(database: Path, *, clock: Any, scheduler: Any, new_id: Any) -> XMemoReference:
    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id,
                          rules=Rules(pack=one_item_too_many))
