"""Planted concurrency bugs in the XMemo reference, for the simulator's tests (and ``--ledger`` style replays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xmemo_ref import Rules, XMemoReference
from xmemo_ref._recall import pack
from xmemo_ref._sqlite import SQLiteXMemoStore


class CheckThenActStore(SQLiteXMemoStore):
    """Looks the idempotency key up before taking the write lock, and never again under it.

    Two replays of one key that both look before either writes both miss, and both write: two
    memories for one key (the second answer replaces the first). The correct store looks inside
    its write transaction.
    """

    def write(self, tenant: Any, *, idempotency: Any, plan: Any) -> tuple[str, bool]:
        if idempotency is not None:
            self._reading()
            with self._state.lock:
                replay = SQLiteXMemoStore._replay(self, self._state.tenant(tenant), idempotency)
            if replay is not None:
                return replay, True
            self._point("checked")
        return super().write(tenant, idempotency=idempotency, plan=plan)

    def _replay(self, memories: Any, claim: Any) -> str | None:
        return None  # under the write lock it does not look again


def check_then_act(database: Path, *, clock: Any, scheduler: Any, new_id: Any) -> XMemoReference:
    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id, store_class=CheckThenActStore)


def one_item_too_many(ranked: Any, *, max_items: int, max_tokens: int, boundary_of: Any) -> Any:
    return pack(ranked, max_items=max_items + 1, max_tokens=max_tokens, boundary_of=boundary_of)


def unbounded_items(database: Path, *, clock: Any, scheduler: Any, new_id: Any) -> XMemoReference:
    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id,
                          rules=Rules(pack=one_item_too_many))
