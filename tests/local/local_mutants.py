"""Broken local CLIs for the aidememo-local profile's kill matrix.

``python tests/local/local_mutants.py NAME ARGS...`` runs ``aidememo-ref ARGS...`` with one
rule broken. Each mutant breaks exactly what one requirement forbids; the matrix in
``test_local_profile.py`` shows the profile fails by that requirement.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path
from typing import Any

from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local import _rules as rules
from aidememo_cli._local import _store, _worker
from aidememo_cli._local._records import AgentType, Status


RENDEZVOUS_S = 5.0  # a load alone waits this long for a partner (every command is its own process)


def _rendezvous(store_path: str) -> None:
    """Hold a load until another live process has loaded from the same store (or RENDEZVOUS_S
    passed), so two writers surely hold the same read: the race window is an event, not a
    guessed sleep. Each process marks its load in a folder beside the store, unmarked at exit."""
    gate = Path(f"{store_path}.loads")
    gate.mkdir(exist_ok=True)
    mine = gate / str(os.getpid())
    mine.touch()
    atexit.register(mine.unlink, missing_ok=True)
    deadline = time.monotonic() + RENDEZVOUS_S
    while time.monotonic() < deadline and not any(entry.name != mine.name for entry in gate.iterdir()):
        time.sleep(0.005)


def no_cas() -> None:
    # Load and write in separate autocommit statements, held between until another process has
    # loaded too, and write without the updated_at check: concurrent writers overwrite each other.
    store = _store.LocalStore
    original_load = store.load_handoff

    def transaction(self: Any, *, write: bool) -> Any:
        from contextlib import nullcontext

        return nullcontext(self)

    def load(self: Any, handoff_id: str) -> Any:
        found = original_load(self, handoff_id)
        _rendezvous(self.path)
        return found

    def write(self: Any, record: Any, expected: int, now_ms: int) -> int:
        self._run("UPDATE handoffs SET status = ?, updated_at = ?, record = ? WHERE handoff_id = ?",
                  (str(record.status), now_ms, __import__("json").dumps(record.to_json()), record.handoff_id))
        return now_ms

    store.transaction = transaction  # type: ignore[method-assign, assignment]
    store.load_handoff = load  # type: ignore[method-assign]
    store.write_handoff = write  # type: ignore[method-assign]


def _patch_accept(change: Any) -> None:
    original = rules.accept

    def accept(record: Any, actor: str, claim_id: str | None, now_ms: int) -> Any:
        return change(original, record, actor, claim_id, now_ms)

    rules.accept = accept  # the operations look the rule up at call time


def claim_overwrite() -> None:
    def change(original: Any, record: Any, actor: str, claim: str | None, now: int) -> Any:
        if record.status is Status.ACCEPTED and claim and record.claim_id != claim:
            return record._replace(claim_id=claim, revision=record.revision + 1)
        return original(record, actor, claim, now)

    _patch_accept(change)


def same_claim_writes() -> None:
    def change(original: Any, record: Any, actor: str, claim: str | None, now: int) -> Any:
        result = original(record, actor, claim, now)
        return record._replace(revision=record.revision + 1) if result is None else result

    _patch_accept(change)


def no_reclaim_attempt() -> None:
    def change(original: Any, record: Any, actor: str, claim: str | None, now: int) -> Any:
        result = original(record, actor, claim, now)
        if result is not None and record.status is Status.ACCEPTED:
            return result._replace(attempt_count=record.attempt_count)
        return result

    _patch_accept(change)


def _patch_return(change: Any) -> None:
    original = rules.return_result

    def return_result(record: Any, actor: str, outcome: Any, fact_id: str, fact: Any, now: int) -> Any:
        return original(record, actor, outcome, fact_id, None if fact is None else change(record, actor, fact), now)

    rules.return_result = return_result


def no_attach_check() -> None:
    _patch_return(lambda record, actor, fact: fact._replace(entity_names=(*fact.entity_names, record.session_id)))


def no_source_check() -> None:
    _patch_return(lambda record, actor, fact: fact._replace(source_id=record.source_id))


def no_author_check() -> None:
    _patch_return(lambda record, actor, fact: fact._replace(actor_id=actor))


def return_rewrites() -> None:
    original = rules.return_result

    def return_result(record: Any, actor: str, outcome: Any, fact_id: str, fact: Any, now: int) -> Any:
        result = original(record, actor, outcome, fact_id, fact, now)
        return record._replace(returned_at=now, revision=record.revision + 1) if result is None else result

    rules.return_result = return_result


def run_accepts_manual() -> None:
    # Claims the assignment before refusing the manual profile: the refusal no longer leaves it pending.
    original = _worker.run

    def run(request: Any, ctx: Any) -> int:
        store = _store.LocalStore(request.store_path)
        with store.transaction(write=True):
            profile = store.get_agent(request.alias)
            if profile is not None and profile.agent is AgentType.MANUAL:
                pending = store.mailbox(column="to_actor", actor=request.alias, source_id=None,
                                        include_completed=False, limit=1)
                if pending:
                    assignments.accept(store, pending[0].handoff_id, request.alias, None, ctx.now_ms)
        store.close()
        return original(request, ctx)

    _worker.run = run


def inbox_leak() -> None:
    original = _store.LocalStore.mailbox

    def mailbox(self: Any, **kwargs: Any) -> Any:
        return original(self, **{**kwargs, "actor": None})

    _store.LocalStore.mailbox = mailbox  # type: ignore[method-assign]


def status_open() -> None:
    rules.check_status_reader = lambda record, actor: None


def mcp_fact_add_drops_session() -> None:
    from aidememo_cli._mcp import _local

    original = _local.LocalTools._fact_add

    def fact_add(self: Any, store: Any, args: Any, now: int) -> Any:
        return original(self, store, {k: v for k, v in args.items() if k != "session_id"}, now)

    _local.LocalTools._fact_add = fact_add  # type: ignore[method-assign]


MUTANTS = {name: func for name, func in globals().items() if callable(func) and not name.startswith("_")
           and func.__module__ == __name__ and name not in ("replace", "Any")}

if __name__ == "__main__":
    MUTANTS[sys.argv[1]]()
    from aidememo_cli import main

    sys.exit(main(sys.argv[2:]))
