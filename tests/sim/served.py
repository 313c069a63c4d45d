"""A reference ledger served on loopback: provisioned for the simulator's actors, or on a file
database with a target file whose bootstrap command provisions it, as an implementer runs it."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aidememo_ref import OffsetClock, ReferenceLedger, serve_in_thread
from aidememo_ref._commands import Command, Op
from aidememo_ref._ledger import Decide
from aidememo_ref._records import Membership, Receipt
from aidememo_ref._store import Scheduler, Store, execute
from simulations.plan import READER
from tests.targetfile import write_target

ACTORS = ("agent-a", "agent-b", "agent-c", READER)


@contextmanager
def served(ledger: ReferenceLedger, actors: Iterable[str] = ACTORS) -> Iterator[tuple[str, dict[str, str]]]:
    """Provision ``actors`` into project ``p`` (READER as a reader, the rest as writers), serve the
    ledger with uvicorn on a free port, and yield ``(url, tokens)``; the ledger is closed after."""
    tokens = {}
    try:
        for actor in actors:
            tokens[actor] = f"tok-{actor}-0123456789"
            ledger.provision(tenant_id="t", project_id="p", actor_id=actor, token=tokens[actor],
                             role="reader" if actor == READER else "writer")
        with serve_in_thread(ledger) as url:
            yield url, tokens
    finally:
        ledger.close()


def blind_accept(store: Store, member: Membership, command: Command, now_ms: int, decide: Decide,
                 scheduler: Scheduler) -> Receipt:
    """An accept that never checks ``expected_revision``: it decides as if the writer had read the
    revision now stored. Unlike the planted races, requests one at a time show it, so it
    reproduces over a URL every time (a stale accept of a pending handoff is answered 200)."""
    if command.op is not Op.ACCEPT:
        return execute(store, member, command, now_ms, decide, scheduler)
    with store.writing(member) as tx:
        receipt = tx.replay(command)
        if receipt is not None:
            return receipt
        stored = tx.resource(command.kind, command.resource_id)
        if stored is not None:
            command = command._replace(expected_revision=stored.revision)
        return tx.apply(command, decide(command, member.actor_id, tx, now_ms), now_ms)


def bootstrap_command(database: Path) -> str:
    """The target file's provisioning template: the reference's own bootstrap command."""
    program = shutil.which("aidememo-ref", path=str(Path(sys.executable).parent)) or "aidememo-ref"
    return (f"{program} bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
            "--actor-id {actor} --token-file {token_file} --role {role}")


@contextmanager
def served_file(database: Path, config: Path, *, bug: bool = False, port: int = 0) -> Iterator[str]:
    """Serve the reference (or, with ``bug``, its ``blind_accept`` variant) on ``database`` with the
    test clock, as ``aidememo-ref serve --database FILE --test-clock`` does, and write ``config``,
    a target file provisioned by the bootstrap command; yields the URL. The database outlives the
    server: serve it again (on the same ``port``) and it still holds every earlier run."""
    ledger = ReferenceLedger(database, clock=OffsetClock(), test_clock=True,
                             execute=blind_accept if bug else None)
    try:
        with serve_in_thread(ledger, port=port) as url:
            write_target(config, url, provision={"command": bootstrap_command(database)})
            yield url
    finally:
        ledger.close()
