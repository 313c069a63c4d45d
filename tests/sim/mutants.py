"""Planted race bugs: the reference with its transaction recipe broken in one place.

Each factory has the signature the simulator's runner takes, ``(database, *, clock, scheduler)
-> ReferenceLedger``, and can be named in a replay file as ``this/file.py:name``. Each variant
answers every request exactly like the reference when requests arrive one at a time; only an
interleaving inside a write exposes it. They are built only from the store's documented
primitives (``reading``/``writing`` transactions, ``replay``, the view, ``apply``) plugged in
through ``ReferenceLedger(execute=...)``, so they run on every storage backend; the three that
also misreport what readers see wrap the ``Store`` protocol the service reads through.

The first four break per-handoff linearizability or the receipts. The last three each break
one property that only the simulator's cross-handoff checks or planned interleavings see:
``receipt_numbers`` (receipts against the change feed), ``late_stamp`` (revisions and
project_seq rising together) and ``stale_cache`` (a read right after a transition).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from aidememo_ref import ReferenceLedger
from aidememo_ref._commands import Command, Op
from aidememo_ref._ledger import Decide
from aidememo_ref._records import Membership, Receipt, Resource
from aidememo_ref._store import Execute, FeedRead, MailboxQuery, MailboxRow, Scheduler, Store, execute

__all__ = ["MUTANTS", "RECIPES", "blind_heartbeat", "double_accept", "late_stamp", "receipt_numbers",
           "replay_outside", "split_decide", "stale_cache"]


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
        scheduler.point("unlocked")  # decided, no lock held: another writer may commit now
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
            shadow = command._replace(command_id=f"{command.command_id}.again.{next(_again)}")
            receipt = tx.apply(shadow, write, now_ms)._replace(command_id=command.command_id)
        else:
            receipt = tx.apply(command, write, now_ms)
        scheduler.point("commit")
        return receipt


# -- races only the cross-handoff checks see ------------------------------------------------------


def _project(member: Membership) -> tuple[str, str]:
    return member.tenant_id, member.project_id


class _ReceiptNumbers:
    """Numbers receipts with its own counter, taken before the write lock; the change log keeps
    the database's sequence. One at a time the two agree; when two writers take numbers in one
    order and commit in the other, each receipt names the other's change-feed entry. Receipts
    stay unique, follow real time and replay identically: only the feed shows it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter: dict[tuple[str, str], int] = {}
        self._given: dict[tuple[str, str, str], int] = {}

    def _renumbered(self, member: Membership, receipt: Receipt) -> Receipt:
        number = self._given.get((*_project(member), receipt.command_id))
        return receipt if number is None else receipt._replace(project_seq=number)

    def __call__(self, store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                 scheduler: Scheduler) -> Receipt:
        with store.reading(member) as tx:
            receipt = tx.replay(command)
            if receipt is None:
                decide(command, member.actor_id, tx, now_ms)  # a refusal raises here and takes no number
        if receipt is not None:
            return self._renumbered(member, receipt)
        with self._lock:
            number = self._counter[_project(member)] = self._counter.get(_project(member), 0) + 1
        scheduler.point("decided")  # numbered, not yet locked: another writer may commit first
        with store.writing(member) as tx:
            scheduler.point("begin")
            receipt = tx.replay(command)
            if receipt is None:
                receipt = tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
                with self._lock:
                    self._given[(*_project(member), command.command_id)] = number
            scheduler.point("commit")
        return self._renumbered(member, receipt)


class _Wrapped:
    """A ``Store`` that delegates to another; subclasses change what one read shows."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Stamps:
    """Public project_seq stamps given after commit, outside the lock, in stamping order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.public: dict[tuple[str, str, int], int] = {}  # (tenant, project, real seq) -> stamp
        self.next: dict[tuple[str, str], int] = {}

    def of(self, member: Membership, seq: int) -> int:
        return self.public.get((*_project(member), seq), seq)


class _StampedStore(_Wrapped):
    """Shows the stamps, not the database's sequence, in the feed and the mailboxes."""

    WINDOW = 64  # how far a stamp can stray from its change's place: the writers in flight

    def __init__(self, inner: Store, stamps: _Stamps) -> None:
        super().__init__(inner)
        self._stamps = stamps

    def changes(self, member: Membership, after_seq: int, limit: int) -> FeedRead:
        read = self._inner.changes(member, max(0, after_seq - self.WINDOW), limit + 2 * self.WINDOW)
        shown = sorted((c._replace(seq=self._stamps.of(member, c.seq)) for c in read.changes), key=lambda c: c.seq)
        return replace(read, changes=[c for c in shown if c.seq > after_seq][: limit + 1])

    def mailbox(self, member: Membership, query: MailboxQuery) -> list[MailboxRow]:
        return [row._replace(project_seq=self._stamps.of(member, row.project_seq))
                for row in self._inner.mailbox(member, query)]


def _late_stamp(stamps: _Stamps) -> Execute:
    """Stamps project_seq after the transaction, not inside it: two commits of one handoff in a
    row, the second sent before the first's answer came, can be stamped in the other order, so
    the higher revision gets the lower project_seq. Receipts and the feed agree with each other,
    stay unique and follow real time; linearizability holds."""

    def recipe(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
               scheduler: Scheduler) -> Receipt:
        with store.writing(member) as tx:
            scheduler.point("begin")
            receipt = tx.replay(command)
            if receipt is not None:
                return receipt._replace(project_seq=stamps.of(member, receipt.project_seq))
            receipt = tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
            scheduler.point("commit")
        scheduler.point("committed")  # the lock is released; the stamp is not given yet
        with stamps.lock:
            key = _project(member)
            stamp = stamps.next[key] = stamps.next.get(key, 0) + 1
            stamps.public[(*key, receipt.project_seq)] = stamp
        return receipt._replace(project_seq=stamp)

    return recipe


class _Versions:
    """Every committed version of every resource, and the writes in flight, per project."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.versions: dict[tuple[str, str, str, str], list[tuple[int, Resource]]] = {}
        self.head: dict[tuple[str, str], int] = {}
        self.in_flight: dict[tuple[str, str], int] = {}
        self.floor: dict[tuple[str, str], int] = {}  # the head when the oldest write in flight began


class _CachedStore(_Wrapped):
    """Serves resource reads from the state before the writes in flight, so as not to wait for
    them: one at a time nothing is ever in flight during a read; under load a read right after
    a transition can show the handoff as it was before it."""

    def __init__(self, inner: Store, versions: _Versions) -> None:
        super().__init__(inner)
        self._versions = versions

    def resource(self, member: Membership, kind: str, resource_id: str) -> Resource | None:
        v = self._versions
        with v.lock:
            if not v.in_flight.get(_project(member)):
                return self._inner.resource(member, kind, resource_id)
            floor = v.floor[_project(member)]
            old = [r for seq, r in v.versions.get((*_project(member), kind, resource_id), []) if seq <= floor]
        return old[-1] if old else None


def _stale_cache(versions: _Versions) -> Execute:
    def recipe(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
               scheduler: Scheduler) -> Receipt:
        key = _project(member)
        with versions.lock:
            versions.in_flight[key] = versions.in_flight.get(key, 0) + 1
            if versions.in_flight[key] == 1:
                versions.floor[key] = versions.head.get(key, 0)
        try:
            scheduler.point("queued")  # in flight, waiting for the write lock
            with store.writing(member) as tx:
                scheduler.point("begin")
                receipt = tx.replay(command)
                if receipt is not None:
                    return receipt
                receipt = tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
                now = tx.resource(receipt.kind, receipt.resource_id)
                with versions.lock:
                    if now is not None:
                        versions.versions.setdefault((*key, receipt.kind, receipt.resource_id), []).append(
                            (receipt.project_seq, now))
                    versions.head[key] = max(versions.head.get(key, 0), receipt.project_seq)
                scheduler.point("commit")
                return receipt
        finally:
            with versions.lock:
                versions.in_flight[key] -= 1

    return recipe


def _with(recipe: Execute, wrap: Callable[[Store], Store] | None = None) -> Any:
    def factory(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
        ledger = ReferenceLedger(database, clock=clock, scheduler=scheduler, execute=recipe)
        if wrap is not None:
            # The service reads through ``service.store`` (a Store); the wrapper is another Store.
            ledger.service.store = wrap(ledger.store)
        return ledger

    return factory


def _fresh(build: Callable[[], tuple[Execute, Callable[[Store], Store] | None]]) -> Any:
    """A factory whose mutant keeps its own state per ledger (counters, stamps, versions)."""

    def factory(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
        recipe, wrap = build()
        return _with(recipe, wrap)(database, clock=clock, scheduler=scheduler)

    return factory


def _stamped() -> tuple[Execute, Callable[[Store], Store]]:
    stamps = _Stamps()
    return _late_stamp(stamps), lambda store: _StampedStore(store, stamps)  # type: ignore[return-value]


def _cached() -> tuple[Execute, Callable[[Store], Store]]:
    versions = _Versions()
    return _stale_cache(versions), lambda store: _CachedStore(store, versions)  # type: ignore[return-value]


# name -> the broken recipe, for factories that open another backend (tests/ref/pg_ledgers.py);
# the last three races keep state per ledger and wrap its store, so they have no lone recipe.
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
receipt_numbers = _fresh(lambda: (_ReceiptNumbers(), None))
late_stamp = _fresh(_stamped)
stale_cache = _fresh(_cached)

# name -> what a maintainer would call the bug
MUTANTS = {
    "split_decide": "revision check and decision outside the write transaction",
    "blind_heartbeat": "a heartbeat that renews a lease it may no longer hold",
    "double_accept": "two concurrent accepts of one revision both answered with success",
    "replay_outside": "receipt lookup outside the write transaction: a retry runs twice",
    "receipt_numbers": "receipts numbered by a counter of their own, taken before the write lock",
    "late_stamp": "project_seq stamped after the commit, outside the lock",
    "stale_cache": "resource reads served from before the writes in flight",
}

# The one check of the simulator that sees each of the races built for one property (the
# first four are seen by the ledger model, by the receipt rules, or by both).
CAUGHT_BY = {
    "receipt_numbers": "change feed",
    "late_stamp": "revision order",
    "stale_cache": "linearizability",
}
