"""Every read rule of the ledger, pure: feed paging and visibility, cursor and epoch checks,
mailbox defaults and paging, search validation and ranking.

The service decodes a read request, asks the store for typed rows, and hands both to a function
here, which checks what upstream checks in upstream's order (wire spec §1.4-1.8, §5; errata 4)
and returns typed results for the service to render. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from . import _visibility
from aidememo_wire.errors import ErrorCode, LedgerError
from ._records import Change, LedgerFact, Membership, Resource
from refkit.records import distinct
from refkit.search import bm25, tokenize
from ._store import FeedRead, MailboxQuery, MailboxRow, SearchIndex
from refkit.text import ascii_lower, trim

__all__ = [
    "MAX_SNAPSHOT_RESOURCES",
    "FeedEntry",
    "FeedPage",
    "SearchHit",
    "change_limit",
    "feed_page",
    "MailboxRequest",
    "mailbox_request",
    "mailbox_for",
    "mailbox_page",
    "search_request",
    "rank",
    "visible_resources",
    "too_large",
    "out_of_range",
]

MAX_SNAPSHOT_RESOURCES: Final = 10_000
DEFAULT_CHANGE_LIMIT: Final = 100
MAX_CHANGE_LIMIT: Final = 10_000
DEFAULT_SEARCH_LIMIT: Final = 20
MAX_SEARCH_LIMIT: Final = 100
MAX_SEARCH_QUERY_BYTES: Final = 4_096
DEFAULT_MAILBOX_LIMIT: Final = 20
MAX_MAILBOX_LIMIT: Final = 100
_I64_MAX: Final = (1 << 63) - 1


def too_large() -> LedgerError:
    return LedgerError(ErrorCode.SNAPSHOT_TOO_LARGE, "project snapshot exceeds the current limit of 10000 resources")


def out_of_range(after_seq: int, head: int) -> LedgerError:
    return LedgerError(ErrorCode.CURSOR_OUT_OF_RANGE,
                       f"cursor sequence {after_seq} is ahead of current project sequence {head}")


def visible_resources(resources: list[Resource], actor_id: str) -> list[Resource]:
    """A snapshot's rows the actor may see (the bound applies before this filter, as upstream)."""
    return [r for r in resources if _visibility.visible_to(r.kind, r.body, actor_id)]


# -- change feeds ---------------------------------------------------------------------------------
@distinct
class FeedEntry(NamedTuple):  # one per entry of every feed read: a tuple, see ``_records``
    change: Change
    materialized: bool  # render the resource at this change's revision too


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedPage:
    epoch: str
    entries: list[FeedEntry]
    next_seq: int
    has_more: bool


def change_limit(limit: int | None) -> int:
    """The page size of a feed request (checked after authentication, as upstream)."""
    value = DEFAULT_CHANGE_LIMIT if limit is None else limit
    if not 1 <= value <= MAX_CHANGE_LIMIT:
        raise LedgerError(ErrorCode.INVALID_CHANGE_BATCH, "invalid change batch: limit must be between 1 and 10000")
    return value


def feed_page(member: Membership, cursor_epoch: str, after_seq: int, limit: int, read: FeedRead, *,
              materialized: bool) -> FeedPage:
    """Check the cursor against the project and keep the entries the member may see.

    The page is cut before filtering, so ``next_seq`` moves past entries the caller may not
    see; a handoff's entries follow its current visibility on the plain feed and the body at
    that change on the materialized one.
    """
    if cursor_epoch != read.epoch:
        raise LedgerError(ErrorCode.CURSOR_EPOCH_MISMATCH,
                          f"cursor epoch {cursor_epoch} does not match current project epoch {read.epoch}")
    if after_seq > read.head:
        raise out_of_range(after_seq, read.head)
    scanned = read.changes[:limit]
    entries: list[FeedEntry] = []
    for change in scanned:
        if materialized:
            visible = _visibility.visible_to(change.kind, change.body, member.actor_id)
        else:
            current = read.current.get((change.kind, change.resource_id))
            visible = current is None or _visibility.visible_to(current.kind, current.body, member.actor_id)
        if visible:
            entries.append(FeedEntry(change=change, materialized=materialized))
    return FeedPage(epoch=read.epoch, entries=entries, next_seq=scanned[-1].seq if scanned else after_seq,
                    has_more=len(read.changes) > limit)


# -- mailboxes ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class MailboxRequest:
    """A mailbox request that passed the checks upstream runs before authentication."""

    inbox: bool
    source_id: str | None
    include_completed: bool | None  # None: the box's default
    before_seq: int | None
    limit: int


def mailbox_request(*, box: str, source_id: str | None, include_completed: bool | None, before_seq: int | None,
                    limit: int | None) -> MailboxRequest:
    """Upstream's ``HandoffQuery::new``, which runs before authentication: the limit only."""
    value = DEFAULT_MAILBOX_LIMIT if limit is None else limit
    if not 1 <= value <= MAX_MAILBOX_LIMIT:
        raise LedgerError.invalid_command("handoff mailbox limit must be between 1 and 100")
    return MailboxRequest(inbox=box == "inbox", source_id=source_id, include_completed=include_completed,
                          before_seq=before_seq, limit=value)


def mailbox_for(member: Membership, request: MailboxRequest) -> MailboxQuery:
    """The member's mailbox query: an outbox shows completed handoffs unless told otherwise.

    Runs after authentication: a ``before_seq`` above 2^63-1 is a valid u64 that upstream's
    store fails to convert only once it reads (500 ``storage_failure``, errata 4), so a caller
    who is not a member gets 401 or 403 first. Client input never earns a 5xx from us: 400.
    """
    if request.before_seq is not None and request.before_seq > _I64_MAX:
        raise LedgerError.invalid_command("before_seq must be at most 9223372036854775807")
    include = (not request.inbox) if request.include_completed is None else request.include_completed
    return MailboxQuery(actor_id=member.actor_id, inbox=request.inbox, source_id=request.source_id,
                        include_completed=include, before_seq=request.before_seq, limit=request.limit)


def mailbox_page(rows: list[MailboxRow], limit: int) -> tuple[list[MailboxRow], int | None]:
    """The page and its ``next_before_seq`` (None on the last page)."""
    page = rows[:limit]
    return page, page[-1].project_seq if len(rows) > limit else None


# -- search ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    fact: LedgerFact
    score: float


def search_request(q: str, limit: int | None) -> tuple[list[str], int]:
    """Checks that run before authentication; returns the distinct query terms and the limit."""
    text = trim(q)
    if not 1 <= len(text.encode("utf-8")) <= MAX_SEARCH_QUERY_BYTES:
        raise LedgerError.invalid_command("search query must contain 1..=4096 bytes")
    value = DEFAULT_SEARCH_LIMIT if limit is None else limit
    if not 1 <= value <= MAX_SEARCH_LIMIT:
        raise LedgerError.invalid_command("search limit must be between 1 and 100")
    return list(dict.fromkeys(tokenize(text))), value


def rank(index: SearchIndex, *, at_least_seq: int | None, mode: str | None, source_id: str | None,
         limit: int) -> list[SearchHit]:
    """BM25 over the index, best first (ties by fact id), after upstream's post-read checks."""
    if index.resources > MAX_SNAPSHOT_RESOURCES:
        raise too_large()
    if at_least_seq is not None and at_least_seq > index.head:
        raise out_of_range(at_least_seq, index.head)
    # A present but empty ``mode=`` is Some("") upstream: refused below, not the default.
    wanted = "auto" if mode is None else ascii_lower(trim(mode))
    if wanted in ("semantic", "hybrid"):
        raise LedgerError.invalid_command("semantic retrieval requires an aidememo-server build with --features semantic")
    if wanted not in ("auto", "lexical"):
        raise LedgerError.invalid_command("search mode must be auto, lexical, semantic, or hybrid")
    scores: dict[str, float] = {}
    for p in index.postings:
        scores[p.fact_id] = scores.get(p.fact_id, 0.0) + bm25(
            tf=p.tf, df=index.df[p.term], n_docs=index.n_docs, doc_len=p.doc_len, avg_len=index.avg_len)
    hits: list[SearchHit] = []
    for fact_id, score in sorted((kv for kv in scores.items() if kv[1] > 0), key=lambda kv: (-kv[1], kv[0])):
        fact = LedgerFact.from_json(index.facts[fact_id])
        if source_id is not None and fact.source_id != source_id:
            continue
        hits.append(SearchHit(fact=fact, score=score))
        if len(hits) == limit:
            break
    return hits
