"""Planted race bugs: the reference with its transaction recipe broken in one place.

Each factory has the signature the simulator's runner takes, ``(database, *, clock, scheduler)
-> ReferenceLedger``, and can be named in a replay file as ``this/file.py:name``. Each variant
answers every request exactly like the reference when requests arrive one at a time; only an
interleaving inside a write exposes it. They are built only from the store's documented
primitives (``reading``/``writing`` transactions, ``replay``, the view, ``apply``) plugged in
through ``ReferenceLedger(execute=...)``, so they run on every storage backend.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

from aidememo_ref import ReferenceLedger
from aidememo_ref._commands import Command, Op
from aidememo_ref._ledger import Decide
from aidememo_ref._records import Membership, Receipt
from aidememo_ref._store import Execute, Scheduler, Store, execute

__all__ = ["MUTANTS", "RECIPES", "blind_heartbeat", "double_accept", "replay_outside", "split_decide"]


def _split_decide(only: Op | None) -> Execute:
    """Decides in a read transaction, then writes in another: the revision check is outside.

    ``only`` limits the bug to one operation; the others keep the correct single transaction.
    """

    def split(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
              scheduler: Scheduler) -> Receipt:
        if only is not None and command.op is not only:
            return execute(store, member, command, now_ms, decide, scheduler)
        with store.reading(member) as tx:
            receipt = tx.replay(command)
            if receipt is not None:
                return receipt
            write = decide(command, member.actor_id, tx, now_ms)
        scheduler.point("decided")  # no lock held here: another writer may commit now
        with store.writing(member) as tx:
            scheduler.point("begin")
            receipt = tx.apply(command, write, now_ms)
            scheduler.point("commit")
            return receipt

    return split


_again = itertools.count(1)


def _replay_outside(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                    scheduler: Scheduler) -> Receipt:
    """Looks the receipt up before the write transaction, so two identical commands both run."""
    with store.reading(member) as tx:
        receipt = tx.replay(command)
    if receipt is not None:
        return receipt
    scheduler.point("decided")
    with store.writing(member) as tx:
        scheduler.point("begin")
        write = decide(command, member.actor_id, tx, now_ms)
        # This variant's receipts have no unique command id: a copy that committed meanwhile is
        # shadowed rather than found, and the command runs a second time.
        if tx.replay(command) is not None:
            shadow = replace(command, command_id=f"{command.command_id}.again.{next(_again)}")
            receipt = replace(tx.apply(shadow, write, now_ms), command_id=command.command_id)
        else:
            receipt = tx.apply(command, write, now_ms)
        scheduler.point("commit")
        return receipt


def _with(recipe: Execute) -> Any:
    def factory(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
        return ReferenceLedger(database, clock=clock, scheduler=scheduler, execute=recipe)

    return factory


# name -> the broken recipe, for factories that open another backend (tests/ref/pg_ledgers.py)
RECIPES: dict[str, Execute] = {
    "split_decide": _split_decide(None),
    "blind_heartbeat": _split_decide(Op.HEARTBEAT),
    "double_accept": _split_decide(Op.ACCEPT),
    "replay_outside": _replay_outside,
}
split_decide = _with(RECIPES["split_decide"])
blind_heartbeat = _with(RECIPES["blind_heartbeat"])
double_accept = _with(RECIPES["double_accept"])
replay_outside = _with(RECIPES["replay_outside"])

# name -> what a maintainer would call the bug
MUTANTS = {
    "split_decide": "revision check and decision outside the write transaction",
    "blind_heartbeat": "a heartbeat that renews a lease it may no longer hold",
    "double_accept": "two concurrent accepts of one revision both answered with success",
    "replay_outside": "receipt lookup outside the write transaction: a retry runs twice",
}
