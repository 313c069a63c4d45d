"""Deliberately broken reference ledgers, one per requirement family, for the kill matrix.

Each mutant is a factory ``(db_path) -> ReferenceLedger`` loaded by the suite through
``--aidememo-embedded-factory mutants:<name>`` in a subprocess of its own, so the monkeypatches
below never leak into another run. Rule mutants replace the rule function (``decide=``), edit
the handoff transition table, or patch one named piece of the reference's pure core; wire
mutants wrap ``Service.handle`` and bend requests or answers the way a faulty server would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aidememo_ref
from aidememo_ref import _commands, _hot, _ledger, _reads, _service, _state, _store, _visibility
from aidememo_wire import canonical as _canonical
from aidememo_ref._commands import Command, Op, RawCommand, ResourcePayload
from aidememo_wire.errors import LedgerError
from aidememo_ref._records import CONTEXT, HandoffContext, Role, Status

Factory = Callable[[str], Any]


def _ledger_for(db_path: str, **kwargs: Any) -> Any:
    return aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True, **kwargs)


def _wrapped(db_path: str, bend: Callable[[Callable[..., Any], str, bytes, list[Any], bytes], Any]) -> Any:
    ledger = _ledger_for(db_path)
    original = ledger.service.handle

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        # options: the MCP gateway's own calls pass on_behalf=True, which must reach the service
        raw = target.encode("latin-1") if isinstance(target, str) else target
        return bend(partial(original, **options), method, raw, list(headers), body)

    ledger.service.handle = handle
    return ledger


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _with_body(response: Any, data: Any) -> Any:
    return dataclasses.replace(response, body=json.dumps(data, separators=(",", ":")).encode())


# -- rule mutants ---------------------------------------------------------------------------------
def cas_ignored(db_path: str) -> Any:
    """expected_revision is never compared: every precondition looks current."""

    def decide(command: Any, actor_id: str, view: Any, now_ms: int) -> Any:
        class Lying:
            def resource(self, kind: str, resource_id: str) -> Any:
                stored = view.resource(kind, resource_id)
                if stored is not None and command.expected_revision is not None:
                    return stored._replace(revision=command.expected_revision)
                return stored

            def member_role(self, actor: str) -> Any:
                return view.member_role(actor)

        return _ledger.decide(command, actor_id, Lying(), now_ms)

    return _ledger_for(db_path, decide=decide)


def wrong_actor_allowed(db_path: str) -> Any:
    """Any member may accept, heartbeat and return: the table loses its receiver rows."""
    _state.TRANSITIONS = tuple(row for row in _state.TRANSITIONS if row.guard is not _state.not_receiver)
    return _ledger_for(db_path)


def reader_can_write(db_path: str) -> Any:
    """Roles are not enforced on write routes (nor on a handoff's receiver)."""
    _service.WRITABLE_ROLES = _ledger.WRITABLE_ROLES = frozenset(Role)
    return _ledger_for(db_path)


def visibility_leak(db_path: str) -> Any:
    """Handoffs and contexts are shown to every member."""
    _visibility.visible_to = lambda kind, body, actor_id: body is not None or kind not in ("handoff", "handoff_context")
    return _ledger_for(db_path)


def failed_return_completes(db_path: str) -> Any:
    """A failed outcome closes the handoff instead of keeping it retryable."""
    _state.TRANSITIONS = tuple(
        dataclasses.replace(row, target=Status.COMPLETED) if row.guard is _state.failed else row
        for row in _state.TRANSITIONS
    )
    return _ledger_for(db_path)


def lease_never_expires(db_path: str) -> Any:
    """A claim stays live forever."""
    _state.claim_is_stale = lambda record, now_ms: False
    return _ledger_for(db_path)


def lease_too_short(db_path: str) -> Any:
    """Leases of 60 s instead of 120 s."""
    return _ledger_for(db_path, lease_ms=60_000)


def raw_kind_unchecked(db_path: str) -> Any:
    """The raw route writes any kind with any operation/change pair."""

    def unchecked(raw: RawCommand) -> Command:
        return Command(command_id=raw.command_id, project_id=raw.project_id,
                       op=Op.RESOURCE_DELETE if raw.change == "delete" else Op.RESOURCE_PUT, kind=raw.kind,
                       resource_id=raw.resource_id, expected_revision=raw.expected_revision,
                       payload=ResourcePayload(value=raw.payload, canonical=raw.payload_json),
                       fingerprint=raw.fingerprint)

    _service.check_raw = unchecked
    return _ledger_for(db_path)


def text_unchecked(db_path: str) -> Any:
    """Topics, contents and focus texts of any length and content are stored."""
    _ledger._text = lambda value, max_bytes, label: None
    return _ledger_for(db_path)


def fingerprint_ascii(db_path: str) -> Any:
    """The fingerprint escapes non-ASCII (Python's json default) instead of raw UTF-8."""

    def fingerprint(**envelope: Any) -> str:
        body = {"project_id": envelope["project_id"], "expected_revision": envelope["expected_revision"],
                "operation": envelope["operation"], "payload": envelope["payload"],
                "resource": {"kind": envelope["resource_kind"], "id": envelope["resource_id"]},
                "change": envelope["change"]}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def envelope_digest(project_id: str, expected_revision: Any, operation: str, payload_json: str, kind: str,
                        resource_id: str, change: str) -> str:
        return fingerprint(project_id=project_id, expected_revision=expected_revision, operation=operation,
                           payload=json.loads(payload_json), resource_kind=kind, resource_id=resource_id,
                           change=change)

    _commands.envelope_digest = _hot.envelope_digest = envelope_digest  # typed routes; the raw route's shortcut
    assert _canonical.envelope_digest is not envelope_digest
    return _ledger_for(db_path)


def context_source_dropped(db_path: str) -> Any:
    """A handoff context does not inherit its session's source_id."""

    def decide(command: Any, actor_id: str, view: Any, now_ms: int) -> Any:
        write = _ledger.decide(command, actor_id, view, now_ms)
        if command.op is Op.CONTEXT_CREATE:
            return _ledger.Write.of(write.kind, write.resource_id, dataclasses.replace(write.record, source_id=None))
        return write

    return _ledger_for(db_path, decide=decide)


def context_length_unchecked(db_path: str) -> Any:
    """A handoff context's content may be of any length (the other texts are still checked)."""
    text = _ledger._text
    _ledger._text = lambda value, max_bytes, label: (None if label == "handoff context"
                                                     else text(value, max_bytes, label))
    return _ledger_for(db_path)


def search_source_prefix(db_path: str) -> Any:
    """Search's source_id filter matches every source that starts with it."""
    rank = _reads.rank

    def prefixed(index: Any, *, at_least_seq: Any, mode: Any, source_id: Any, limit: int) -> Any:
        hits = rank(index, at_least_seq=at_least_seq, mode=mode, source_id=None, limit=1_000_000)
        return [h for h in hits if source_id is None or (h.fact.source_id or "").startswith(source_id)][:limit]

    _reads.rank = prefixed
    return _ledger_for(db_path)


def inbox_lists_others(db_path: str) -> Any:
    """An inbox also lists the handoffs others sent to other receivers (its own sends stay out)."""
    from aidememo_ref import _sqlite

    mailbox = _sqlite.SQLiteStore.mailbox

    def leaky(self: Any, member: Any, query: Any) -> Any:
        if not query.inbox:
            return mailbox(self, member, query)
        project = self._read(member)
        with self._state.lock:
            receivers = sorted(project.inbox)
            mine = set(project.outbox.get(query.actor_id, ()))
        rows = {row.body: row for receiver in receivers
                for row in mailbox(self, member, dataclasses.replace(query, actor_id=receiver))
                if receiver == query.actor_id or json.loads(row.body)["handoff_id"] not in mine}
        return sorted(rows.values(), key=lambda row: row.project_seq, reverse=True)[:query.limit + 1]

    _sqlite.SQLiteStore.mailbox = leaky  # type: ignore[method-assign]
    return _ledger_for(db_path)



# -- upstream's guards at their edges (checks/test_guards.py, test_edges.py) ------------------------
def _context_check_dropped(detail: str, skip: Callable[[Any, Any, str], bool]) -> Factory:
    """A send attaches a context that its one guard with message ``detail`` refuses, where ``skip``
    (context, payload, sender) says the guard is not looked at; every other guard still runs."""

    def decide(command: Any, actor_id: str, view: Any, now_ms: int) -> Any:
        try:
            return _ledger.decide(command, actor_id, view, now_ms)
        except LedgerError as error:
            p = command.payload
            if command.op is not Op.SEND or p.context_id is None or detail not in error.message:
                raise
            stored = view.resource(CONTEXT, p.context_id)
            if not skip(HandoffContext.from_json(stored.body), p, actor_id):
                raise
            write = _ledger.decide(command._replace(payload=p._replace(context_id=None)), actor_id, view, now_ms)
            return _ledger.Write.of(write.kind, write.resource_id,
                                    dataclasses.replace(write.record, context_id=p.context_id))

    def factory(db_path: str) -> Any:
        return _ledger_for(db_path, decide=decide)

    return factory


_ROUTE = "context actor route does not match the handoff"
context_route_sender_end_unchecked = _context_check_dropped(_ROUTE, lambda context, p, sender: context.to_actor == p.to_actor)
context_route_sender_end_unchecked.__doc__ = ("A send checks only the receiver end of its context's actor route: "
                                              "a context another member wrote for this handoff is attached.")
context_route_receiver_end_unchecked = _context_check_dropped(_ROUTE, lambda context, p, sender: context.from_actor == sender)
context_route_receiver_end_unchecked.__doc__ = ("A send checks only the sender end of its context's actor route: "
                                                "a context written for another receiver is attached.")
context_session_unchecked = _context_check_dropped("context belongs to a different session",
                                                   lambda context, p, sender: True)
context_session_unchecked.__doc__ = "A send attaches a context of the same source written in another session."

context_handoff_ordered = _context_check_dropped("context belongs to a different handoff",
                                                 lambda context, p, sender: context.handoff_id < p.handoff_id)
context_handoff_ordered.__doc__ = ("A send refuses a context of another handoff only when that handoff's id sorts "
                                   "after its own (> in place of !=).")


context_session_ordered = _context_check_dropped("context belongs to a different session",
                                                 lambda context, p, sender: context.session_id < p.session_id)
context_session_ordered.__doc__ = "A send refuses a context of another session only when its id sorts after its own."
context_route_ordered = _context_check_dropped(_ROUTE, lambda context, p, sender: (context.from_actor, context.to_actor)
                                               < (sender, p.to_actor))
context_route_ordered.__doc__ = "A send refuses a context's actor route only when it sorts after the handoff's."


def revision_compared_by_identity(db_path: str) -> Any:
    """A precondition compares revisions with `is not` (true for CPython's shared small ints only)."""

    def check(command: Any, current: Any) -> None:
        if current is None:
            raise LedgerError.not_found()
        if current.revision is not command.expected_revision:
            raise LedgerError.stale_revision(command.expected_revision, current.revision)

    _ledger._check_revision = check
    return _ledger_for(db_path)


def completed_lease_expires(db_path: str) -> Any:
    """Any handoff with an expiry in its record goes stale, a completed one too (its identical
    evidence is then refused after the lease time)."""
    _state.claim_is_stale = lambda record, now_ms: (
        record.outcome is not _state.Outcome.FAILED and record.claim_expires_at_ms is not None
        and now_ms >= record.claim_expires_at_ms)
    return _ledger_for(db_path)



def _ids_ordered(compare: Callable[[str, str], bool]) -> Factory:
    """Every id guard of the handoff rules compares with ``compare`` (an order) instead of ``!=``."""

    def factory(db_path: str) -> Any:
        fact = _state._fact
        guards = {
            _state.not_receiver: lambda record, attempt: compare(attempt.actor_id, record.to_actor),
            _state.other_claim: lambda record, attempt: compare(attempt.claim_id, record.claim_id or ""),
            # An accept's "the caller's own claim" rows: the same order read the other way round.
            _state.same_claim: lambda record, attempt: not compare(attempt.claim_id, record.claim_id or ""),
            _state.same_claim_live: lambda record, attempt: (not compare(attempt.claim_id, record.claim_id or "")
                                                             and not _state.lease_expired(record, attempt)),
            _state.fact_from_other_session: lambda record, attempt: compare(fact(attempt).session_id,
                                                                            record.session_id),
            _state.fact_not_by_receiver: lambda record, attempt: compare(fact(attempt).actor_id, record.to_actor),
            _state.same_evidence: lambda record, attempt: (
                attempt.claim_id == record.claim_id and attempt.outcome is record.outcome
                and not compare(fact(attempt).fact_id, record.result_fact_id or "")),
        }
        _state.TRANSITIONS = tuple(dataclasses.replace(row, guard=guards.get(row.guard, row.guard))
                                   for row in _state.TRANSITIONS)
        return _ledger_for(db_path)

    return factory


ids_ordered_below = _ids_ordered(lambda given, right: given < right)
ids_ordered_below.__doc__ = "Claim, actor, result fact and session ids are refused only when they sort before the right one."
ids_ordered_above = _ids_ordered(lambda given, right: given > right)
ids_ordered_above.__doc__ = "Claim, actor, result fact and session ids are refused only when they sort after the right one."


def lease_live_at_expiry(db_path: str) -> Any:
    """A lease is still live at exactly its claim_expires_at_ms (stale only after it)."""
    _state.claim_is_stale = lambda record, now_ms: (
        record.status is Status.ACCEPTED and record.outcome is not _state.Outcome.FAILED
        and record.claim_expires_at_ms is not None and now_ms > record.claim_expires_at_ms)
    return _ledger_for(db_path)



def _limits(**values: int) -> Factory:
    """The read rules with the named limits of ``_reads`` set to ``values`` (one off its edge)."""

    def factory(db_path: str) -> Any:
        for name, value in values.items():
            assert hasattr(_reads, name), name
            setattr(_reads, name, value)
        return _ledger_for(db_path)

    factory.__doc__ = ", ".join(f"{name} = {value}" for name, value in values.items()) + " (off by its edge)."
    return factory


mailbox_max_refused = _limits(MAX_MAILBOX_LIMIT=99)
mailbox_default_ten = _limits(DEFAULT_MAILBOX_LIMIT=10)
feed_max_refused = _limits(MAX_CHANGE_LIMIT=9_999)
feed_default_fifty = _limits(DEFAULT_CHANGE_LIMIT=50)
search_max_refused = _limits(MAX_SEARCH_LIMIT=99)
search_default_ten = _limits(DEFAULT_SEARCH_LIMIT=10)
query_4096_refused = _limits(MAX_SEARCH_QUERY_BYTES=4_095)
mailbox_i64_max_refused = _limits(_I64_MAX=(1 << 63) - 2)


def search_at_least_exact(db_path: str) -> Any:
    """A search's at_least_seq is refused unless it is exactly the head (below it too)."""
    rank = _reads.rank

    def exact(index: Any, *, at_least_seq: Any, **rest: Any) -> Any:
        if at_least_seq is not None and at_least_seq != index.head:
            raise _reads.out_of_range(at_least_seq, index.head)
        return rank(index, at_least_seq=at_least_seq, **rest)

    _reads.rank = exact
    return _ledger_for(db_path)


def query_one_byte_refused(db_path: str) -> Any:
    """A search query of one byte (after trimming) is refused as too short."""
    from refkit.text import trim

    checked = _reads.search_request

    def two_at_least(q: str, limit: Any) -> Any:
        if len(trim(q).encode("utf-8")) == 1:
            raise LedgerError.invalid_command("search query must contain 2..=4096 bytes")
        return checked(q, limit)

    _reads.search_request = two_at_least
    return _ledger_for(db_path)


def epoch_ordered(db_path: str) -> Any:
    """A feed cursor's epoch is refused only when it sorts after the current one (> for !=)."""
    page = _reads.feed_page

    def ordered(member: Any, cursor_epoch: str, after_seq: int, limit: int, read: Any, *, materialized: bool) -> Any:
        epoch = read.epoch if cursor_epoch < read.epoch else cursor_epoch
        return page(member, epoch, after_seq, limit, read, materialized=materialized)

    _reads.feed_page = ordered
    return _ledger_for(db_path)


def search_source_ordered(db_path: str) -> Any:
    """Search's source_id filter drops only the facts whose source sorts after it (> for !=)."""
    rank = _reads.rank

    def ordered(index: Any, *, source_id: Any, limit: int, **rest: Any) -> Any:
        hits = rank(index, source_id=None, limit=10**6, **rest)
        if source_id is not None:
            hits = [hit for hit in hits if hit.fact.source_id is not None and not hit.fact.source_id > source_id]
        return hits[:limit]

    _reads.rank = ordered
    return _ledger_for(db_path)


def search_ties_by_id_descending(db_path: str) -> Any:
    """Search hits of equal score come by fact_id descending instead of ascending."""
    rank = _reads.rank

    def ranked(index: Any, **options: Any) -> Any:
        hits = sorted(rank(index, **options), key=lambda hit: hit.fact.fact_id, reverse=True)
        return sorted(hits, key=lambda hit: -hit.score)  # stable: ties keep the descending ids

    _reads.rank = ranked
    return _ledger_for(db_path)


def mailbox_last_page_cursor(db_path: str) -> Any:
    """A mailbox page that ends exactly at the last entry still offers a next page."""
    _reads.mailbox_page = lambda rows, limit: (rows[:limit], rows[:limit][-1].project_seq
                                                if rows and len(rows) >= limit else None)
    return _ledger_for(db_path)


def feed_last_page_has_more(db_path: str) -> Any:
    """A feed page that ends exactly at the head says has_more."""
    page = _reads.feed_page

    def more(member: Any, cursor_epoch: str, after_seq: int, limit: int, read: Any, *, materialized: bool) -> Any:
        answer = page(member, cursor_epoch, after_seq, limit, read, materialized=materialized)
        return dataclasses.replace(answer, has_more=answer.has_more or len(read.changes) == limit)

    _reads.feed_page = more
    return _ledger_for(db_path)

# -- request decoding: what mutating _commands showed no check read ---------------------------------
def struct_arrays_refused(db_path: str) -> Any:
    """Request structs are taken as JSON objects only: one sent as an array of its fields is refused."""
    from aidememo_ref import _decode

    struct = _decode._struct

    def objects_only(name: str, value: Any, structs: Any, *, strict: bool) -> Any:
        if isinstance(value, list):
            raise _decode._Fail(f"invalid type: a sequence, expected struct {name}")
        return struct(name, value, structs, strict=strict)

    _decode._struct = objects_only
    return _ledger_for(db_path)


def non_object_body_crashes(db_path: str) -> Any:
    """The raw route iterates a body's keys before it knows the body is an object: null, a number
    or a boolean answers 500."""
    decode = _service.raw_command

    def iterating(body: Any) -> Any:
        if type(body) is not dict:
            _commands._REQUEST_FIELDS.issuperset(body)
        return decode(body)

    _service.raw_command = iterating
    return _ledger_for(db_path)


def raw_refusal_crashes(db_path: str) -> Any:
    """A raw command the one-pass decoder is not sure of answers 500: the general decoder, which
    words the refusal (or accepts a struct sent as an array), is never reached."""
    decode = _service.raw_command

    def fast_only(body: Any) -> Any:
        if type(body) is dict and _commands._REQUEST_FIELDS.issuperset(body) and _hot.plain_raw(body) is None:
            raise TypeError("no RawCommand from None")
        return decode(body)

    _service.raw_command = fast_only
    return _ledger_for(db_path)


# -- command ids on the typed routes: one broken route each ----------------------------------------
def _reuse_replays(op: Op) -> Factory:
    """``op``'s route answers a reused command id with another body for the same resource (and the
    same actor) by replaying the earlier receipt, instead of 409 command_conflict."""
    first: dict[tuple[str, str, str], tuple[Command, str]] = {}
    lock = threading.Lock()

    def lax(store: Any, member: Any, command: Command, now_ms: int, decide: Any, scheduler: Any) -> Any:
        key = (member.tenant_id, member.project_id, command.command_id)
        with lock:
            earlier, actor = first.get(key, (None, None))
        if (earlier is not None and command.op is op and actor == member.actor_id
                and (earlier.op, earlier.kind, earlier.resource_id) == (op, command.kind, command.resource_id)):
            command = earlier  # the stored receipt answers, whatever the body said
        receipt = _store.execute(store, member, command, now_ms, decide, scheduler)
        with lock:
            first.setdefault(key, (command, member.actor_id))
        return receipt

    def factory(db_path: str) -> Any:
        return _ledger_for(db_path, execute=lax)

    factory.__doc__ = f"A reused command id with another body on {op} replays the earlier receipt."
    return factory


def _replay_runs_again(op: Op) -> Factory:
    """``op``'s route has no receipt lookup: an identical resubmission runs as a new command."""
    again = itertools.count(1)

    def forgetful(store: Any, member: Any, command: Command, now_ms: int, decide: Any, scheduler: Any) -> Any:
        if command.op is not op:
            return _store.execute(store, member, command, now_ms, decide, scheduler)
        with store.writing(member) as tx:
            if tx.replay(command) is not None:
                shadow = command._replace(command_id=f"{command.command_id}.again.{next(again)}")
                return tx.apply(shadow, decide(shadow, member.actor_id, tx, now_ms), now_ms)._replace(
                    command_id=command.command_id)
            return tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)

    def factory(db_path: str) -> Any:
        return _ledger_for(db_path, execute=forgetful)

    factory.__doc__ = f"An identical resubmission on {op} runs again instead of replaying its receipt."
    return factory


def replay_recommits(db_path: str) -> Any:
    """A replay answers the stored receipt but commits the command once more where its rules allow."""
    again = itertools.count(1)

    def twice(store: Any, member: Any, command: Command, now_ms: int, decide: Any, scheduler: Any) -> Any:
        with store.writing(member) as tx:
            receipt = tx.replay(command)
            if receipt is None:
                return tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
            shadow = command._replace(command_id=f"{command.command_id}.again.{next(again)}")
            try:
                tx.apply(shadow, decide(shadow, member.actor_id, tx, now_ms), now_ms)
            except LedgerError:
                pass  # a create or a spent revision cannot run again: the receipt alone answers
            return receipt

    return _ledger_for(db_path, execute=twice)


TYPED_OPS = {"sessions": Op.SESSION_CREATE, "facts": Op.FACT_CREATE, "handoff-contexts": Op.CONTEXT_CREATE,
             "handoffs": Op.SEND, "accept": Op.ACCEPT, "heartbeat": Op.HEARTBEAT, "return": Op.RETURN}
for _route, _op in TYPED_OPS.items():
    globals()[f"reuse_replays_{_route.replace('-', '_')}"] = _reuse_replays(_op)
    globals()[f"replay_runs_again_{_route.replace('-', '_')}"] = _replay_runs_again(_op)


# -- wire mutants -------------------------------------------------------------------------------
@dataclass
class _Seen:
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    bodies: dict[str, tuple[bytes, bytes]] = dataclasses.field(default_factory=dict)
    counter: int = 0


def _command_id_rewriter(db_path: str, *, on_identical: bool) -> Any:
    seen = _Seen()

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        data = _json(body) if method == "POST" else None
        if isinstance(data, dict) and isinstance(data.get("command_id"), str):
            auth = next((v for k, v in headers if k.lower() == b"authorization"), b"")
            key = data["command_id"]
            with seen.lock:
                previous = seen.bodies.get(key)
                if previous is None:
                    seen.bodies[key] = (body, auth)
                elif (previous == (body, auth)) is on_identical:
                    seen.counter += 1
                    data["command_id"] = f"{key}-again-{seen.counter}"
                    body = json.dumps(data, separators=(",", ":")).encode()
        return handle(method, target, headers, body)

    return _wrapped(db_path, bend)


def replay_reexecutes(db_path: str) -> Any:
    """A resubmitted command runs again instead of returning its stored receipt."""
    return _command_id_rewriter(db_path, on_identical=True)


def command_conflict_accepted(db_path: str) -> Any:
    """A reused command id with a different body or actor is executed as a new command."""
    return _command_id_rewriter(db_path, on_identical=False)


def scheme_case_insensitive(db_path: str) -> Any:
    """`bearer`, `BEARER` and extra spaces are accepted as the Bearer scheme."""

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        fixed = []
        for name, value in headers:
            if name.lower() == b"authorization" and value[:6].lower() == b"bearer":
                value = b"Bearer " + value[6:].strip()
            fixed.append((name, value))
        return handle(method, target, fixed, body)

    return _wrapped(db_path, bend)


def cursor_stuck(db_path: str) -> Any:
    """Feeds answer next_cursor = the request's cursor, so a replica never advances."""

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        response = handle(method, target, headers, body)
        data = _json(response.body)
        if b"/changes" in target and response.status == 200 and isinstance(data, dict):
            data["next_cursor"] = data["cursor"]
            return _with_body(response, data)
        return response

    return _wrapped(db_path, bend)


def mailbox_never_pages(db_path: str) -> Any:
    """The mailbox never offers a next page."""

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        response = handle(method, target, headers, body)
        data = _json(response.body)
        if target.split(b"?")[0].endswith(b"/handoffs") and method == "GET" and isinstance(data, dict):
            data["next_before_seq"] = None
            return _with_body(response, data)
        return response

    return _wrapped(db_path, bend)


def unknown_fields_ignored(db_path: str) -> Any:
    """Bodies with unknown or identity fields are accepted (fields silently dropped)."""

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        data = _json(body) if method == "POST" else None
        if isinstance(data, dict):
            for holder in (data, data.get("payload")):
                if isinstance(holder, dict):
                    for name in ("tenant_id", "actor_id", "created_by", "colour"):
                        holder.pop(name, None)
            body = json.dumps(data, separators=(",", ":")).encode()
        return handle(method, target, headers, body)

    return _wrapped(db_path, bend)


def auth_after_lookup(db_path: str) -> Any:
    """Heartbeat and return look the handoff up before the token: without one they answer 404."""
    missing = b'{"error":{"code":"resource_not_found","message":"resource not found"}}'

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        anonymous = not any(k.lower() == b"authorization" for k, _ in headers)
        if method == "POST" and anonymous and target.split(b"?")[0].endswith((b"/heartbeat", b"/return")):
            return dataclasses.replace(handle(method, target, headers, body), status=404, body=missing)
        return handle(method, target, headers, body)

    return _wrapped(db_path, bend)


def _bend_query(db_path: str, rewrite: Callable[[list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]]) -> Any:
    """A wire mutant that rewrites the query pairs of every GET before the reference decodes them."""

    def bend(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
        path, mark, query = target.partition(b"?")
        if method == "GET" and mark:
            pairs = [pair.partition(b"=")[::2] for pair in query.split(b"&") if pair]
            target = path + b"?" + b"&".join(k + b"=" + v for k, v in rewrite(pairs))
        return handle(method, target, headers, body)

    return _wrapped(db_path, bend)


def empty_query_means_default(db_path: str) -> Any:
    """A present but empty query value (`limit=`, `mode=`) is taken as absent: the default applies."""
    return _bend_query(db_path, lambda pairs: [(k, v) for k, v in pairs if v])


def _mode_rewriter(normal: Callable[[str], str]) -> Callable[[list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]]:
    def rewrite(pairs: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        out = []
        for key, value in pairs:
            if key == b"mode":
                text = urllib.parse.unquote_plus(value.decode("latin-1"))
                value = urllib.parse.quote(normal(text)).encode() if normal(text) in _MODES else b"fuzzy"
            out.append((key, value))
        return out

    return rewrite


_MODES = ("auto", "lexical", "semantic", "hybrid")


def search_mode_exact(db_path: str) -> Any:
    """The search mode is matched as sent: no trimming, no case folding (`LEXICAL` is refused)."""
    return _bend_query(db_path, _mode_rewriter(lambda text: text))


def search_mode_python_strip(db_path: str) -> Any:
    """The search mode is normalised with Python's strip() and lower(), which also drop U+001C..U+001F."""
    return _bend_query(db_path, _mode_rewriter(lambda text: text.strip().lower()))


# name -> (factory, the requirements whose checks must kill it)
MUTANTS: dict[str, tuple[Factory, tuple[str, ...]]] = {
    "cas_ignored": (cas_ignored, ("AM-HO-1", "AM-HL-CAS-2", "AM-CMD-5", "AM-CONF-07")),
    "replay_reexecutes": (replay_reexecutes, ("AM-CMD-2", "AM-CMD-8", "AM-CONF-03", "AM-HO-6")),
    "command_conflict_accepted": (command_conflict_accepted, ("AM-CMD-3", "AM-CMD-8", "AM-CONF-05", "AM-CONF-06")),
    "wrong_actor_allowed": (wrong_actor_allowed, ("AM-HO-1", "AM-HL-WHO-1")),
    "reader_can_write": (reader_can_write, ("AM-AUTH-4",)),
    "scheme_case_insensitive": (scheme_case_insensitive, ("AM-AUTH-2",)),
    "visibility_leak": (visibility_leak, ("AM-VIS-1", "AM-HL-WHO-2")),
    "cursor_stuck": (cursor_stuck, ("AM-FEED-3",)),
    "mailbox_never_pages": (mailbox_never_pages, ("AM-MBOX-1",)),
    "failed_return_completes": (failed_return_completes, ("AM-HO-5",)),
    "fingerprint_ascii": (fingerprint_ascii, ("AM-CMD-7",)),
    "lease_never_expires": (lease_never_expires, ("AM-HL-ACC-3", "AM-HL-HB-3", "AM-HL-RET-5")),
    "lease_too_short": (lease_too_short, ("AM-HO-2", "AM-HL-HB-1")),
    "raw_kind_unchecked": (raw_kind_unchecked, ("AM-CMD-4",)),
    "text_unchecked": (text_unchecked, ("AM-TYPED-4",)),
    "unknown_fields_ignored": (unknown_fields_ignored, ("AM-AUTH-5", "AM-JSON-3")),
    "empty_query_means_default": (empty_query_means_default, ("AM-WIRE-3", "AM-SEARCH-3")),
    "search_mode_exact": (search_mode_exact, ("AM-SEARCH-3",)),
    "search_mode_python_strip": (search_mode_python_strip, ("AM-SEARCH-3",)),
    # Entries naming "ID:clause" must be killed by a check that reads that clause.
    "context_source_dropped": (context_source_dropped, ("AM-TYPED-3:context",)),
    "context_length_unchecked": (context_length_unchecked, ("AM-TYPED-4:context",)),
    "search_source_prefix": (search_source_prefix, ("AM-SEARCH-1:source",)),
    "inbox_lists_others": (inbox_lists_others, ("AM-MBOX-1:relative",)),
    "context_route_sender_end_unchecked": (context_route_sender_end_unchecked, ("AM-HL-SEND-3:sender",)),
    "context_route_receiver_end_unchecked": (context_route_receiver_end_unchecked, ("AM-HL-SEND-3:receiver",)),
    "context_session_unchecked": (context_session_unchecked, ("AM-HL-SEND-3:session",)),
    "context_handoff_ordered": (context_handoff_ordered, ("AM-HL-SEND-2:foreign",)),
    "context_session_ordered": (context_session_ordered, ("AM-HL-SEND-3:session",)),
    "context_route_ordered": (context_route_ordered, ("AM-HL-SEND-3:sender", "AM-HL-SEND-3:receiver")),
    "revision_compared_by_identity": (revision_compared_by_identity, ("AM-EDGE-4",)),
    "ids_ordered_below": (ids_ordered_below, tuple(f"AM-HL-EXACT-1:{c}" for c in ("claim", "actor", "fact", "session"))),
    "ids_ordered_above": (ids_ordered_above, tuple(f"AM-HL-EXACT-1:{c}" for c in ("claim", "actor", "fact", "session"))),
    "lease_live_at_expiry": (lease_live_at_expiry, ("AM-HL-HB-4",)),
    "completed_lease_expires": (completed_lease_expires, ("AM-HL-RET-5:completed",)),
    **{name: (globals()[name], (entry,)) for name, entry in (
        ("mailbox_max_refused", "AM-EDGE-1:limits"), ("mailbox_default_ten", "AM-EDGE-1:default"),
        ("mailbox_last_page_cursor", "AM-EDGE-1:last-page"), ("feed_max_refused", "AM-EDGE-2:limit"),
        ("feed_default_fifty", "AM-EDGE-2:default"), ("feed_last_page_has_more", "AM-EDGE-2:last-page"),
        ("search_max_refused", "AM-EDGE-3:limit"), ("search_default_ten", "AM-EDGE-3:default"),
        ("query_4096_refused", "AM-EDGE-3:query-bytes"), ("mailbox_i64_max_refused", "AM-EDGE-1:before-seq"))},
    "replay_recommits": (replay_recommits, ("AM-CMD-2:nothing",)),
    "search_at_least_exact": (search_at_least_exact, ("AM-SEARCH-1:at-least-served",)),
    "search_ties_by_id_descending": (search_ties_by_id_descending, ("AM-SEARCH-1:order",)),
    "query_one_byte_refused": (query_one_byte_refused, ("AM-EDGE-3:query-one-byte",)),
    "epoch_ordered": (epoch_ordered, ("AM-FEED-1:epoch",)),
    "search_source_ordered": (search_source_ordered, ("AM-SEARCH-1:source",)),
    "struct_arrays_refused": (struct_arrays_refused, ("AM-JSON-4:array",)),
    "non_object_body_crashes": (non_object_body_crashes, ("AM-JSON-4:not-a-struct",)),
    "raw_refusal_crashes": (raw_refusal_crashes, ("AM-JSON-3:body-id",)),
    "auth_after_lookup": (auth_after_lookup, ("AM-AUTH-1",)),
    **{f"reuse_replays_{route.replace('-', '_')}": (globals()[f"reuse_replays_{route.replace('-', '_')}"],
                                                    ("AM-CMD-3:typed",)) for route in TYPED_OPS},
    **{f"replay_runs_again_{route.replace('-', '_')}": (globals()[f"replay_runs_again_{route.replace('-', '_')}"],
                                                        ("AM-CMD-2:identical",)) for route in TYPED_OPS},
}


# -- broken MCP gateways: the reference's gateway with one of its rules taken out -----------------
def _gateway_ledger(db_path: str) -> Any:
    from aidememo_ref._gateway import Bindings

    return _ledger_for(db_path, bindings=Bindings())


def gateway_lax_protocol(db_path: str) -> Any:
    """Missing MCP headers are filled in instead of refused, and results lose their serverInfo."""
    from aidememo_ref._gateway import _post

    post = _post.Gateway.post

    def lax(self: Any, project_id: str, request: Any, read_json: Any) -> Any:
        method = (_json(request.body) or {}).get("method", "") if isinstance(_json(request.body), dict) else ""
        named = {k.lower() for k, _ in request.headers}
        extra = [(b"mcp-protocol-version", _post.PROTOCOL_VERSION.encode())] if b"mcp-protocol-version" not in named else []
        if b"mcp-method" not in named:
            extra.append((b"mcp-method", str(method).encode()))
        answer = post(self, project_id, request._replace(headers=request.headers + tuple(extra)), read_json)
        data = _json(answer.body)
        if isinstance(data, dict) and isinstance(data.get("result"), dict):
            data["result"].pop("_meta", None)
            return _with_body(answer, data)
        return answer

    _post.Gateway.post = lax  # type: ignore[method-assign]
    return _gateway_ledger(db_path)


def gateway_any_version(db_path: str) -> Any:
    """Any Mcp-Protocol-Version the client sends is taken for the supported one (a missing one is still refused)."""
    from aidememo_ref._gateway import _post

    post = _post.Gateway.post

    def lenient(self: Any, project_id: str, request: Any, read_json: Any) -> Any:
        headers = tuple((k, _post.PROTOCOL_VERSION.encode()) if k.lower() == b"mcp-protocol-version" else (k, v)
                        for k, v in request.headers)
        return post(self, project_id, request._replace(headers=headers), read_json)

    _post.Gateway.post = lenient  # type: ignore[method-assign]
    return _gateway_ledger(db_path)


def gateway_overexposes(db_path: str) -> Any:
    """Readers are listed the write tools, and undeclared arguments (actor_id) are ignored."""
    from aidememo_ref._gateway import _post, _tools

    _post.tool_list = lambda reader: _tools.tool_list(False)
    _tools.ensure_only = lambda args, allowed: None
    _post.ensure_only = _tools.ensure_only
    return _gateway_ledger(db_path)


def gateway_misroutes(db_path: str) -> Any:
    """handoff_list always reads the inbox, and accept/return take the current revision as expected."""
    from aidememo_ref._gateway import _post

    route, rest = _post.rest_call, _post.Gateway._rest

    def inbox_only(name: str, args: Any) -> Any:
        return route(name, {**args, "box": "inbox"} if name == "handoff_list" else args)

    def current_revision(self: Any, method: str, project_id: str, path: str, authorization: bytes,
                         body: Any = None) -> Any:
        if method == "POST" and path.endswith(("/accept", "/return")):
            status, _, parsed = rest(self, "GET", project_id, path.rsplit("/", 1)[0], authorization)
            if status == 200:
                body = {**body, "expected_revision": parsed["revision"]}
        return rest(self, method, project_id, path, authorization, body)

    _post.rest_call = inbox_only
    _post.Gateway._rest = current_revision  # type: ignore[method-assign]
    return _gateway_ledger(db_path)


def binding_actor_and_rest_open(db_path: str) -> Any:
    """A bound token may name any actor_id, its bound actor is never compared, and REST serves it."""
    from aidememo_ref import _service
    from aidememo_ref._gateway import _post

    bound = _post._bound_arguments

    def lenient(name: str, arguments: Any, binding: Any) -> Any:
        return bound(name, {k: v for k, v in arguments.items() if k != "actor_id"}, binding)

    _post._bound_arguments = lenient
    _post.Gateway._binding = lambda self, authorization: None  # type: ignore[method-assign]
    handle = _service.Service.handle
    # REST serves a bound token: every request is treated as the gateway's call on its behalf.
    _service.Service.handle = lambda self, *args, on_behalf=False: handle(self, *args, on_behalf=True)  # type: ignore[method-assign]
    return _gateway_ledger(db_path)


def binding_source_leak(db_path: str) -> Any:
    """Every resource counts as inside the bound source."""
    from aidememo_ref._gateway import _post

    _post._in_source = lambda record, binding: True
    return _gateway_ledger(db_path)


MUTANTS.update({
    "gateway_lax_protocol": (gateway_lax_protocol, ("AM-MCP-1", "AM-MCP-6")),
    "gateway_any_version": (gateway_any_version, ("AM-MCP-1:wrong-version",)),
    "gateway_overexposes": (gateway_overexposes, ("AM-MCP-2", "AM-MCP-4")),
    "gateway_misroutes": (gateway_misroutes, ("AM-MCP-3", "AM-MCP-5")),
    "binding_actor_and_rest_open": (binding_actor_and_rest_open, ("AM-BIND-1", "AM-BIND-3")),
    "binding_source_leak": (binding_source_leak, ("AM-BIND-2",)),
})


# -- race mutants: the simulator's planted races, met by real concurrency ----------------------------


class _Widened:
    """Holds each writer a moment (0 to 5 ms, drawn from a fixed seed) at the points where the
    planted races live, so a few seconds of real concurrency meet them in either order; the
    simulator forces the same interleavings instead. ``queued_s`` widens the wait before the write
    lock alone: a stale read needs a write that queued before the read-back's write committed and
    is still queued when the read comes, and under load 5 ms is too short to be met reliably.

    A writer that decided outside its transaction (``unlocked``: the split decision of
    ``double_accept``) waits up to 100 ms for the next one to decide too, so the single round of
    simultaneous accepts in AM-HL-CAS-3 meets the race even when thread start-up on a loaded
    machine spreads the requests wider than a few milliseconds."""

    def __init__(self, queued_s: float = 0.005) -> None:
        self._rng = random.Random(20261130)
        self._lock = threading.Lock()
        self._queued_s = queued_s
        self._met = threading.Condition()
        self._arrivals = 0

    def point(self, name: str) -> None:
        if name == "unlocked":
            with self._met:
                self._arrivals += 1
                mine = self._arrivals
                self._met.notify_all()
                deadline = time.monotonic() + 0.1
                while self._arrivals == mine and (left := deadline - time.monotonic()) > 0:
                    self._met.wait(left)
        elif name in ("decided", "committed", "queued"):
            with self._lock:
                pause = self._rng.uniform(0, self._queued_s if name == "queued" else 0.005)
            time.sleep(pause)


def _race(name: str, queued_s: float = 0.005) -> Factory:
    def factory(db_path: str) -> Any:
        from tests.sim import mutants as races  # one copy of each race, on the store's seam

        return getattr(races, name)(Path(db_path), clock=aidememo_ref.OffsetClock(),
                                    scheduler=_Widened(queued_s))

    factory.__doc__ = f"{name} (tests/sim/mutants.py), with its race window widened"
    return factory


double_accept = _race("double_accept")
receipt_numbers = _race("receipt_numbers")
late_stamp = _race("late_stamp")
stale_cache = _race("stale_cache", queued_s=0.03)
MUTANTS["double_accept"] = (double_accept, ("AM-HL-CAS-3",))
MUTANTS["receipt_numbers"] = (receipt_numbers, ("AM-RACE-1",))
MUTANTS["late_stamp"] = (late_stamp, ("AM-RACE-2",))
MUTANTS["stale_cache"] = (stale_cache, ("AM-RACE-3",))


# -- state variants: faults behind a handoff's deeper states (issue 35) ---------------------------
def context_route_receiver_only(db_path: str) -> Any:
    """A send's context is matched on the receiver end of its actor route only: a context another
    member wrote for the handoff, to its receiver, is attached (the sender end is never compared)."""

    def decide(command: Any, actor_id: str, view: Any, now_ms: int) -> Any:
        class SenderBlind:
            def resource(self, kind: str, resource_id: str) -> Any:
                stored = view.resource(kind, resource_id)
                if kind == "handoff_context" and stored is not None and stored.body is not None:
                    return stored._replace(body=json.dumps({**json.loads(stored.body), "from_actor": actor_id}))
                return stored

            def member_role(self, actor: str) -> Any:
                return view.member_role(actor)

        sending = isinstance(command.payload, _commands.HandoffSendPayload)
        return _ledger.decide(command, actor_id, SenderBlind() if sending else view, now_ms)

    return _ledger_for(db_path, decide=decide)


def inbox_lists_completed(db_path: str) -> Any:
    """The inbox lists completed handoffs by default too (the outbox's default taken for both boxes)."""
    mailbox_for = _reads.mailbox_for

    def listing(member: Any, request: Any) -> Any:
        default = request.include_completed is None
        return mailbox_for(member, dataclasses.replace(request, include_completed=True) if default else request)

    _reads.mailbox_for = listing
    return _ledger_for(db_path)


MUTANTS["context_route_receiver_only"] = (context_route_receiver_only, ("AM-HL-SEND-3:sender",))
MUTANTS["inbox_lists_completed"] = (inbox_lists_completed, ("AM-MBOX-1:completed",))


def transition_of_nothing_is_stale(db_path: str) -> Any:
    """A transition of a handoff never sent answers 409 stale_revision: the revision is compared,
    an absent handoff's as 0, before the handoff is loaded (mutation testing of _ledger's load)."""

    def decide(command: Any, actor_id: str, view: Any, now_ms: int) -> Any:
        moving = isinstance(command.payload, _commands.HandoffClaimPayload | _commands.HandoffReturnPayload)
        if moving and view.resource("handoff", command.resource_id) is None:
            raise LedgerError.stale_revision(command.expected_revision or 0, 0)
        return _ledger.decide(command, actor_id, view, now_ms)

    return _ledger_for(db_path, decide=decide)


MUTANTS["transition_of_nothing_is_stale"] = (transition_of_nothing_is_stale, ("AM-CMD-5:absent",))


# -- real time: no test clock and short leases, so lease expiry is observed by waiting ------------
SHORT_LEASE_MS = 3000  # long enough for the shared set-up of every lease check, and for the step taken
# just before expiry to come in time, on a loaded machine (1500 ms: that step came late once in CI, UNTESTABLE)


def _short_lease(db_path: str, *, test_clock: bool = False) -> Any:
    if test_clock:
        return _ledger_for(db_path, lease_ms=SHORT_LEASE_MS)
    return aidememo_ref.ReferenceLedger(db_path, lease_ms=SHORT_LEASE_MS)


def no_test_clock(db_path: str) -> Any:
    """The reference as served without --test-clock: 120 s leases, no virtual clock (not a mutant)."""
    return aidememo_ref.ReferenceLedger(db_path)


def real_time_reference(db_path: str) -> Any:
    """The reference without the test clock, granting leases of SHORT_LEASE_MS (not a mutant)."""
    return _short_lease(db_path)


def real_time_reference_with_clock(db_path: str) -> Any:
    """The same, with the test clock served (not a mutant): virtual and forced real time must agree."""
    return _short_lease(db_path, test_clock=True)


def heartbeat_after_expiry(db_path: str) -> Any:
    """An expired claim is still accepted for heartbeat (and revived by it)."""
    _state.TRANSITIONS = tuple(row for row in _state.TRANSITIONS
                               if not (row.op is Op.HEARTBEAT and row.guard is _state.lease_expired))
    return _short_lease(db_path)


def reclaim_refused_after_expiry(db_path: str) -> Any:
    """A new claim on an expired lease is refused as if the old one were live (only a failed claim is replaced)."""
    _state.TRANSITIONS = tuple(
        dataclasses.replace(row, guard=_state.claim_failed) if row.guard is _state.failed_or_expired else row
        for row in _state.TRANSITIONS
    )
    return _short_lease(db_path)


def lease_never_expires_real_time(db_path: str) -> Any:
    """A claim stays live forever (as lease_never_expires, met without the test clock)."""
    _state.claim_is_stale = lambda record, now_ms: False
    return _short_lease(db_path)


# name -> (factory, the requirements whose checks must kill it), run with --real-time-leases
REAL_TIME_MUTANTS: dict[str, tuple[Factory, tuple[str, ...]]] = {
    "heartbeat_after_expiry": (heartbeat_after_expiry, ("AM-HL-HB-3",)),
    "reclaim_refused_after_expiry": (reclaim_refused_after_expiry, ("AM-HL-ACC-3",)),
    "lease_never_expires_real_time": (lease_never_expires_real_time, ("AM-HL-ACC-3", "AM-HL-HB-3", "AM-HL-RET-5")),
}
