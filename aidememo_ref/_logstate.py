"""The ledger's current state in memory, folded from its append-only change log.

SQLite layout 5 stores each command as one row of one rowid table (``_sqlite``). What the rules
and the reads look a command up by (its receipt by command id, a resource's current revision and
body, the project's next sequence, the change feed, the mailbox and the search index) is kept
here instead, one ``Project`` per (tenant, project), built by applying the log's rows in rowid
order (each project's rows come in its sequence order; anything else is a corrupt file).
``LogState.applied`` is the last rowid folded in; a row is applied once, in order, and applying
one already applied does nothing, so several threads may offer the same row. A row that cannot
be applied (out of order, a fact body that is not a fact) raises ``ValueError`` and changes
nothing, so the state stays the fold of a prefix of the log.

Which rows feed the two indexes follows the typed routes' records: a row carrying a handoff
status (``Row.status``) sets that handoff's mailbox entry; the first revision of a ``fact`` row is
indexed for search by its ``content`` (raw routes only write ``custom.*`` kinds, so every such
row is a typed fact). No I/O, no database driver: the store reads the rows and holds
``LogState.lock`` while it applies them or looks anything up.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import NamedTuple

from refkit.records import distinct
from ._hot import build
from ._records import FACT, Change, LedgerFact, Resource
from refkit.search import term_counts

__all__ = ["LogState", "Project", "Row", "MailboxEntry"]


@distinct
class Row(NamedTuple):
    """One log row, in the table's column order."""

    n: int  # rowid: the order rows were committed in, across all projects of the file
    tenant_id: str
    project_id: str
    seq: int
    kind: str
    resource_id: str
    revision: int
    actor_id: str
    committed_at_ms: int
    body: str | None
    command_id: str
    fingerprint: str
    from_actor: str | None  # the four handoff-index fields: set exactly on handoff records' rows
    to_actor: str | None
    source_id: str | None
    status: str | None

    def resource(self) -> Resource:
        """The resource as this row left it."""
        return build(Resource, (self.kind, self.resource_id, self.revision, self.body))  # ``_hot``


@distinct
class MailboxEntry(NamedTuple):
    from_actor: str
    to_actor: str
    source_id: str | None
    status: str
    updated_seq: int  # the sequence of the handoff's latest transition


class Project:
    """One project's state: its log rows in sequence order (``rows[seq - 1]``, the feed) and what
    is found by key. Feed entries and current resources stay rows until read (``feed``,
    ``resource``): building a frozen record costs more than appending the row, and a write need
    not build any."""

    __slots__ = ("rows", "receipts", "resources", "handoffs", "inbox", "outbox", "docs", "doc_total", "terms",
                 "_order")

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.receipts: dict[str, Row] = {}  # command id -> its row (the receipt's fields)
        self.resources: dict[tuple[str, str], Row] = {}  # (kind, id) -> the resource's latest row
        self.handoffs: dict[str, MailboxEntry] = {}
        self.inbox: dict[str, set[str]] = {}  # actor -> handoff ids addressed to it
        self.outbox: dict[str, set[str]] = {}
        self.docs: dict[str, int] = {}  # fact id -> token count
        self.doc_total = 0
        self.terms: dict[str, dict[str, int]] = {}  # term -> fact id -> term frequency
        self._order: list[tuple[str, str]] | None = None  # resource keys sorted, until a new key comes

    @property
    def head(self) -> int:
        return len(self.rows)

    def feed(self, after_seq: int, count: int) -> list[Change]:
        """Up to ``count`` feed entries after ``after_seq`` (clamped to 0..head)."""
        start = max(0, min(after_seq, len(self.rows)))
        return [build(Change, (row.seq, row.kind, row.resource_id, row.revision, row.actor_id,  # ``_hot``
                               row.committed_at_ms, row.body))
                for row in self.rows[start:start + count]]

    def resource(self, kind: str, resource_id: str) -> Resource | None:
        row = self.resources.get((kind, resource_id))
        return None if row is None else row.resource()

    def ordered(self) -> list[tuple[str, str]]:
        """Resource keys by (kind, id): SQLite's BINARY order, which is code-point order."""
        if self._order is None:
            self._order = sorted(self.resources)
        return self._order

    def apply(self, row: Row, content: str | None) -> None:
        kind, rid, revision, body = row.kind, row.resource_id, row.revision, row.body
        if row.seq != len(self.rows) + 1:
            raise ValueError(f"log row {row.n} has sequence {row.seq} after {len(self.rows)}")
        terms: tuple[Counter[str], int] | None = None
        if row.status is None and kind == FACT and revision == 1 and body is not None:
            # Facts are create-only, so their terms are indexed exactly once; parsed before any
            # change here, so a stored body that is not a fact leaves the project as it was.
            terms = term_counts(LedgerFact.from_json(body).content if content is None else content)
        self.rows.append(row)
        self.receipts[row.command_id] = row
        key = (kind, rid)
        if key not in self.resources:
            self._order = None
        self.resources[key] = row
        if row.status is not None:
            assert row.from_actor is not None and row.to_actor is not None
            old = self.handoffs.get(rid)
            if old is not None:
                self.inbox[old.to_actor].discard(rid)
                self.outbox[old.from_actor].discard(rid)
            self.handoffs[rid] = MailboxEntry(row.from_actor, row.to_actor, row.source_id, row.status, row.seq)
            self.inbox.setdefault(row.to_actor, set()).add(rid)
            self.outbox.setdefault(row.from_actor, set()).add(rid)
        elif terms is not None:
            counts, length = terms
            self.docs[rid] = length
            self.doc_total += length
            for term, tf in counts.items():
                self.terms.setdefault(term, {})[rid] = tf


class LogState:
    """Every project of one file, as of log row ``applied``."""

    __slots__ = ("applied", "projects", "lock")

    def __init__(self) -> None:
        self.applied = 0
        self.projects: dict[tuple[str, str], Project] = {}
        self.lock = threading.Lock()

    def project(self, tenant_id: str, project_id: str) -> Project:
        key = (tenant_id, project_id)
        project = self.projects.get(key)
        if project is None:
            project = self.projects[key] = Project()
        return project

    def apply(self, row: Row, content: str | None = None) -> None:
        """Fold one row in (``content``: a fact's text when the caller has it, saving a parse)."""
        if row.n <= self.applied:
            return
        if row.n != self.applied + 1:
            raise ValueError(f"log row {row.n} applied after row {self.applied}")
        self.project(row.tenant_id, row.project_id).apply(row, content)
        self.applied = row.n
