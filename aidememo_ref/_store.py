"""The storage seam: one ``Store`` protocol, its typed rows, and the recipe that runs a command.

A store is everything the service needs from a database and nothing more: authenticate a
bearer digest, open a transaction bound to one caller's project, and read typed rows. Inside
a transaction three primitives do a write's work:

* ``replay(command)``: the stored receipt of an identical earlier command, or None for a new
  command id (the same id from another actor, or with another fingerprint or coordinate, is
  ``command_conflict``: wire spec §2.4);
* the ``View`` (``resource``, ``member_role``) the pure rules read while they decide;
* ``apply(command, write, now_ms)``: allocate the next project sequence and revision, write
  resource, change, receipt and indexes, and return the receipt.

``execute`` composes them the one correct way: replay, decide and apply inside a single write
transaction, so no writer slips between a revision check and its write, and a retry finds its
receipt. The kit's planted race bugs compose the same primitives wrongly (``ReferenceLedger(
execute=...)``), so they run unchanged on every backend. A backend implements ``Store``,
``ReadTx`` and ``WriteTx``; nothing else in the reference knows which database it talks to.

Pure: this module defines shapes and the recipe, and imports no database driver.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol, TypeAlias, runtime_checkable

from ._commands import Command
from ._ledger import Decide, View, Write
from ._provision import ProvisionError, StoreError
from ._errors import AideMemoRefError
from ._records import Change, Membership, Receipt, Resource
from refkit.records import distinct
from refkit.scheduler import NO_SCHEDULER, Scheduler

__all__ = [
    "Scheduler",
    "NO_SCHEDULER",
    "Denied",
    "ReadTx",
    "WriteTx",
    "Snapshot",
    "FeedRead",
    "MailboxQuery",
    "MailboxRow",
    "Posting",
    "SearchIndex",
    "Store",
    "PlainStore",
    "Execute",
    "execute",
    "ProvisionError",
    "StoreError",
    "MembershipChanged",
]


class MembershipChanged(AideMemoRefError):
    """A membership the store answered from memory (``authenticate(..., deferred=True)``) was no
    longer current when the store checked it; nothing was written, and the service answers the
    request again with a full check."""


class Denied(StrEnum):
    """Why a bearer digest is not a member of the requested project (wire spec §4.1)."""

    BAD_TOKEN = "bad_token"  # 401: unknown, revoked, or its tenant or actor is not active
    NOT_MEMBER = "not_member"  # 403: a valid token without an active membership there


class ReadTx(View, Protocol):
    """An open transaction on one member's project: the rules' view plus receipt replay."""

    def replay(self, command: Command) -> Receipt | None: ...


class WriteTx(ReadTx, Protocol):
    """A transaction that holds the project's write lock until it ends."""

    def apply(self, command: Command, write: Write, now_ms: int) -> Receipt: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Every resource of a project at one sequence, ordered by (kind, id)."""

    epoch: str
    at_seq: int
    resources: list[Resource]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedRead:
    """One read of the change feed: head, up to limit+1 changes after the cursor, and the current
    state of the participant-scoped resources among them (their visibility follows it)."""

    epoch: str
    head: int
    changes: list[Change]
    current: dict[tuple[str, str], Resource]


@dataclass(frozen=True, slots=True, kw_only=True)
class MailboxQuery:
    """A page of one actor's inbox or outbox, newest transition first (upstream ``HandoffQuery``)."""

    actor_id: str
    inbox: bool
    source_id: str | None
    include_completed: bool
    before_seq: int | None
    limit: int


@distinct
class MailboxRow(NamedTuple):  # one per handoff of every mailbox read: a tuple, see ``_records``
    project_seq: int  # the sequence of the handoff's latest transition
    revision: int
    body: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Posting:
    term: str
    fact_id: str
    tf: int
    doc_len: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchIndex:
    """One read of the lexical index: head, corpus statistics, postings and the matched facts."""

    epoch: str
    head: int
    resources: int  # all resource rows, for the snapshot bound
    n_docs: int
    avg_len: float
    df: dict[str, int]
    postings: list[Posting]
    facts: dict[str, str]  # fact_id -> canonical body


class Store(Protocol):
    """A ledger database. Safe to share between threads; several stores (in several processes)
    may open one database and behave as one ledger."""

    def schema_version(self) -> int:
        """What ``/health`` reports: upstream's schema version for this backend."""
        ...

    def authenticate(self, digest: bytes, project_id: str, *, deferred: bool = False) -> Membership | Denied:
        """The caller behind a bearer token's SHA-256, as a member of ``project_id``.

        With ``deferred`` the store may answer from what it remembers without reading the
        database, and check that answer at the start of the next transaction this thread opens
        (or in ``confirm``), raising ``MembershipChanged`` there if it is no longer current. A
        caller that defers opens a transaction or calls ``confirm`` before it answers anything.
        """
        ...

    def confirm(self) -> None:
        """Check a deferred ``authenticate`` answer that no transaction has checked yet (raises
        ``MembershipChanged``); does nothing when there is none."""
        ...

    def writing(self, member: Membership) -> AbstractContextManager[WriteTx]:
        """A write transaction on the member's project: commits on exit, rolls back on error."""
        ...

    def reading(self, member: Membership) -> AbstractContextManager[ReadTx]:
        """A read-only transaction (one snapshot) on the member's project."""
        ...

    def resource(self, member: Membership, kind: str, resource_id: str) -> Resource | None: ...

    def snapshot(self, member: Membership, max_rows: int) -> Snapshot | None:
        """The project's resources read atomically, or None when it has more than ``max_rows``."""
        ...

    def changes(self, member: Membership, after_seq: int, limit: int) -> FeedRead: ...

    def mailbox(self, member: Membership, query: MailboxQuery) -> list[MailboxRow]:
        """Up to ``query.limit + 1`` rows (one more than a page tells whether another follows)."""
        ...

    def search(self, member: Membership, terms: list[str]) -> SearchIndex: ...

    def provision(self, *, tenant_id: str, project_id: str, actor_id: str, token_digest: bytes, role: str,
                  actor_kind: str, project_epoch: str | None, new_epoch: str, tenant_name: str,
                  project_name: str, actor_name: str, now_ms: int) -> str:
        """Idempotent bootstrap of tenant, project, actor, membership and token binding.

        Returns the project epoch. Re-running with the same arguments changes nothing; a
        conflicting epoch, actor kind, role or token owner raises ``ProvisionError`` and rolls
        the whole bootstrap back.
        """
        ...

    def close(self) -> None: ...


@runtime_checkable
class PlainStore(Store, Protocol):
    """A store with the raw route's shortcut (``_hot``): ``execute`` for a caller it remembers."""

    def put_plain(self, digest: bytes, command: Command, now_ms: int) -> Receipt | None:
        """``execute`` with ``_ledger.decide`` for a new raw command of the member that
        ``authenticate(digest, command.project_id, deferred=True)`` would answer from memory,
        checked in the transaction (a refusal or a fault raises as there); None, with nothing
        written, for anything else."""
        ...


Execute: TypeAlias = Callable[[Store, Membership, Command, int, Decide, Scheduler], Receipt]


def execute(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
            scheduler: Scheduler) -> Receipt:
    """Replay, or decide and commit, one command in one write transaction.

    The receipt lookup, the rules' reads and the write share the transaction: a concurrent
    writer of the same revision waits for the lock and then fails its own revision check.
    """
    told = scheduler is not NO_SCHEDULER  # three calls saved on every command outside a simulation
    with store.writing(member) as tx:
        if told:
            scheduler.point("begin")
        receipt = tx.replay(command)
        if receipt is not None:
            return receipt
        write = decide(command, member.actor_id, tx, now_ms)
        if told:
            scheduler.point("decided")
        receipt = tx.apply(command, write, now_ms)
        if told:
            scheduler.point("commit")
        return receipt
