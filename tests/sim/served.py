"""A reference ledger provisioned for the simulator's actors and served on loopback."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from aidememo_ref import ReferenceLedger, serve_in_thread
from simulations.plan import READER

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
