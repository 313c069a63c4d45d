"""What a long campaign keeps: threads and connections by concurrency, not by batches run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from simulations.campaign import run_campaign
from simulations.targets import reference_factory


def test_batches_reuse_their_lanes_threads_and_connections() -> None:
    ledgers: list[Any] = []
    serving: set[threading.Thread] = set()
    peak_connections = 0

    def factory(database: Path, *, clock: Any, scheduler: Any) -> Any:
        ledger = reference_factory(database, clock=clock, scheduler=scheduler)
        handle = ledger.handle

        def spy(*args: Any) -> Any:
            serving.add(threading.current_thread())
            return handle(*args)
        ledger.handle = spy
        ledgers.append(ledger)
        return ledger

    def on_batch(_elapsed: float, _operations: int) -> None:
        nonlocal peak_connections
        peak_connections = max(peak_connections, len(ledgers[0].store._connections))

    result = run_campaign(seed=3, max_batches=80, budget_s=120, factory=factory, on_batch=on_batch)
    assert len(result.plan.batches) == 80
    lanes = len(result.plan.workers)
    # Eighty batches ran on at most one thread per lane (plus the planner's), and so on as many
    # connections: a new thread per batch would have served from hundreds.
    assert len(serving) <= lanes + 1
    assert peak_connections <= lanes + 1
