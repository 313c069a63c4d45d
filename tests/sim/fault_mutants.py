"""Planted variants of the reference server that only faults reveal, each a ``[serve]`` command.

``python tests/sim/fault_mutants.py NAME serve ARGS...`` runs ``aidememo-ref serve ARGS...`` with
the transaction recipe (``ReferenceLedger(execute=...)``) replaced by NAME's. Each breaks one
promise a crash or a lost answer puts to the test (issue 39); ``test_faults.py`` shows a short
fault campaign finds each, and that the same command finds it again.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from any directory

from aidememo_ref._commands import Command, Op  # noqa: E402
from aidememo_ref._ledger import Decide, View, Write  # noqa: E402
from aidememo_ref._records import Handoff, Membership, Receipt  # noqa: E402
from aidememo_ref._state import LEASE_MS  # noqa: E402
from aidememo_ref._store import Scheduler, Store, execute  # noqa: E402

_LOCK = threading.Lock()


class _Memory:
    """What one process remembers; a restart forgets it all."""

    receipts: dict[tuple[str, str], Receipt] = {}
    base: dict[str, int] = {}
    incarnation = uuid.uuid4().hex[:8]


def memory_receipts(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                    scheduler: Scheduler) -> Receipt:
    """Command-id receipts kept in memory only: the store's row carries another id, so after a
    restart a retried command runs again (a second change, a second receipt)."""
    key = (member.project_id, command.command_id)
    with _LOCK:
        known = _Memory.receipts.get(key)
        if known is not None:
            return known
        stored = command._replace(command_id=f"{command.command_id}~{_Memory.incarnation}")
        with store.writing(member) as tx:
            receipt = tx.apply(stored, decide(stored, member.actor_id, tx, now_ms), now_ms)
        receipt = receipt._replace(command_id=command.command_id)
        _Memory.receipts[key] = receipt
        return receipt


class _Rollback(Exception):
    pass


# Only a kill between the answer and the commit shows it. A campaign's kill falls there by
# construction (on the answer, in the proxy's hands): the window need only outlast the proxy's
# reaction, which a loaded machine stretches past 10 ms (a replay then missed it 1 time in 5).
WRITE_BEHIND_S = 0.15


def answer_before_commit(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                         scheduler: Scheduler) -> Receipt:
    """The receipt is answered from a transaction that is rolled back; the write is committed
    ``WRITE_BEHIND_S`` later by a thread (writers and readers wait for it, so without a crash
    nobody can tell). A kill in between loses a write whose receipt was answered."""
    _LOCK.acquire()
    receipt: Receipt | None = None
    try:
        with store.writing(member) as tx:
            replayed = tx.replay(command)
            if replayed is not None:
                _LOCK.release()
                return replayed
            receipt = tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
            raise _Rollback
    except _Rollback:
        pass
    except BaseException:
        _LOCK.release()
        raise
    assert receipt is not None

    def commit() -> None:
        try:
            time.sleep(WRITE_BEHIND_S)
            execute(store, member, command, now_ms, decide, scheduler)
        finally:
            _LOCK.release()

    threading.Thread(target=commit, daemon=True).start()
    return receipt


def forget_seq_head(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                    scheduler: Scheduler) -> Receipt:
    """A restart forgets the project's sequence head: new receipts number their project_seq from
    where this process started (right for the first process on a fresh database only)."""
    with store.writing(member) as tx:
        replayed = tx.replay(command)
        if replayed is not None:
            return replayed
        receipt = tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
    base = _Memory.base.setdefault(member.project_id, receipt.project_seq - 1)
    return receipt._replace(project_seq=receipt.project_seq - base)


def retry_second_transition(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                            scheduler: Scheduler) -> Receipt:
    """A retried accept (its answer lost) is decided again, from the handoff's revision now, as a
    new accept: a second transition, instead of its stored receipt."""
    if command.op is not Op.ACCEPT:
        return execute(store, member, command, now_ms, decide, scheduler)
    with store.writing(member) as tx:
        replayed = tx.replay(command)
        if replayed is None:
            return tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)
        current = tx.resource(command.kind, command.resource_id)
        again = command._replace(command_id=f"{command.command_id}~{uuid.uuid4().hex[:8]}",
                                 expected_revision=None if current is None else current.revision)
        receipt = tx.apply(again, decide(again, member.actor_id, tx, now_ms), now_ms)
        return receipt._replace(command_id=command.command_id)


def heartbeat_revives(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                      scheduler: Scheduler) -> Receipt:
    """A heartbeat on a claim whose lease ran out is judged as if it still lived, and renews it
    from now: the expired claim comes back to life instead of a 409 (a lease is only ever seen
    to run out when the clock moves)."""
    if command.op is not Op.HEARTBEAT:
        return execute(store, member, command, now_ms, decide, scheduler)

    def lenient(cmd: Command, actor: str, view: View, now: int) -> Write:
        stored = view.resource(cmd.kind, cmd.resource_id)
        expires = Handoff.from_json(stored.body).claim_expires_at_ms if stored and stored.body else None
        if expires is None or now < expires:
            return decide(cmd, actor, view, now)
        write = decide(cmd, actor, view, expires - 1)
        assert isinstance(write.record, Handoff)
        return Write.of(write.kind, write.resource_id,
                        replace(write.record, claim_heartbeat_at_ms=now, claim_expires_at_ms=now + LEASE_MS))

    return execute(store, member, command, now_ms, lenient, scheduler)


MUTANTS = {f.__name__: f for f in (memory_receipts, answer_before_commit, forget_seq_head, retry_second_transition,
                                   heartbeat_revives)}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in MUTANTS:
        print(f"usage: fault_mutants.py {{{','.join(MUTANTS)}}} serve ARGS...", file=sys.stderr)
        return 2
    from aidememo_cli import main as cli
    from aidememo_ref import _reference

    recipe = MUTANTS[argv[0]]
    original = _reference.ReferenceLedger.__init__

    def planted(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("execute", recipe)
        original(self, *args, **kwargs)
        if recipe is answer_before_commit:
            handle = self.service.handle

            def after_pending_writes(method: str, *rest: Any) -> Any:
                if method != "POST":
                    with _LOCK:  # a read waits for the write behind it, as the mutant's docstring says
                        pass
                return handle(method, *rest)

            self.service.handle = after_pending_writes

    _reference.ReferenceLedger.__init__ = planted  # type: ignore[method-assign]
    return cli(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
