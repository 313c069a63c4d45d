"""Planted race bugs: variants of the reference store that sequential tests cannot see.

Each factory has the signature the simulator's runner takes, ``(database, *, clock, scheduler)
-> ReferenceLedger``, and can be named in a replay file as ``this/file.py:name``. Each variant
answers every request exactly like the reference when requests arrive one at a time; only an
interleaving inside a write exposes it. They reach into the reference's private store on
purpose: they are the reference, broken in one place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidememo_ref import ReferenceLedger
from aidememo_ref._sqlite import SQLiteStore, _TxView

__all__ = ["MUTANTS", "blind_heartbeat", "double_accept", "replay_outside", "split_decide"]


class _SplitDecideStore(SQLiteStore):
    """Decides in a read transaction, then writes in another: the revision check is outside.

    ``only`` limits the bug to one operation; the others keep the correct single transaction.
    """

    only: str | None = None

    def execute(self, member: Any, command: Any, now_ms: int, decide: Any) -> str:
        if self.only is not None and command.operation != self.only:
            return super().execute(member, command, now_ms, decide)
        tenant, project, actor = member.tenant_id, member.project_id, member.actor_id
        with self._transaction("DEFERRED") as conn:
            stored = self._replay(conn, member, command)
            if stored is not None:
                return stored
            write = decide(command, actor, _TxView(conn, tenant, project), now_ms)
        self._point("decided")  # no lock held here: another writer may commit now
        with self._transaction("IMMEDIATE") as conn:
            self._point("begin")
            return self._apply(conn, member, command, write, now_ms)


class _HeartbeatStore(_SplitDecideStore):
    only = "handoff.heartbeat"


class _AcceptStore(_SplitDecideStore):
    only = "handoff.accept"


class _ReplayOutsideStore(SQLiteStore):
    """Looks the receipt up before the write transaction, so two identical commands both run."""

    def execute(self, member: Any, command: Any, now_ms: int, decide: Any) -> str:
        tenant, project, actor = member.tenant_id, member.project_id, member.actor_id
        with self._transaction("DEFERRED") as conn:
            stored = self._replay(conn, member, command)
        if stored is not None:
            return stored
        self._point("decided")
        with self._transaction("IMMEDIATE") as conn:
            self._point("begin")
            write = decide(command, actor, _TxView(conn, tenant, project), now_ms)
            # The receipts table has no unique key in this variant's mind: drop the duplicate
            # instead of failing, as a store without that constraint would.
            conn.execute(
                "DELETE FROM receipts WHERE tenant_id=? AND project_id=? AND command_id=?",
                (tenant, project, command.command_id),
            )
            return self._apply(conn, member, command, write, now_ms)


def _with_store(store_class: type[SQLiteStore]) -> Any:
    def factory(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
        return ReferenceLedger(database, clock=clock, scheduler=scheduler, store_class=store_class)

    return factory


split_decide = _with_store(_SplitDecideStore)
blind_heartbeat = _with_store(_HeartbeatStore)
double_accept = _with_store(_AcceptStore)
replay_outside = _with_store(_ReplayOutsideStore)

# name -> what a maintainer would call the bug
MUTANTS = {
    "split_decide": "revision check and decision outside the write transaction",
    "blind_heartbeat": "a heartbeat that renews a lease it may no longer hold",
    "double_accept": "two concurrent accepts of one revision both answered with success",
    "replay_outside": "receipt lookup outside the write transaction: a retry runs twice",
}
