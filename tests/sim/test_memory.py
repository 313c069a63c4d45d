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


def test_the_history_is_on_disk_batch_by_batch_as_check_reads_it(tmp_path: Path) -> None:
    from simulations.cli import main
    from simulations.linearizability.history import parse_history

    path = tmp_path / "out" / "run.jsonl"
    seen: list[int] = []

    def on_batch(_elapsed: float, operations: int) -> None:
        # Already written when the batch is over: a run killed here leaves this much.
        seen.append(len(path.read_text(encoding="utf-8").splitlines()) - 1 - operations)

    result = run_campaign(seed=7, max_batches=25, budget_s=120, on_batch=on_batch, history_file=path)
    assert seen and set(seen) == {0}
    header, ops = parse_history(path.read_text(encoding="utf-8").splitlines(), str(path))
    assert header.model == "ledger"
    # A run that found nothing keeps no history in memory: the file holds it, every operation.
    assert result.finding is None and result.history == () and result.operations == len(ops) > 0
    assert main(["check", str(path)]) == 0


def test_the_printed_check_command_reads_the_runs_history(tmp_path: Path) -> None:
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    run = sh("aidememo-sim run --seed 5 --batches 30 --ledger "
             f"{Path(__file__).with_name('mutants.py')}:split_decide --out found")
    assert run.returncode == 1, run.stdout + run.stderr
    printed = re.search(r"check it with: (aidememo-sim check \S+)\)", run.stdout)
    assert printed is not None, run.stdout
    answers = [sh(printed.group(1)) for _ in (1, 2)]
    assert [a.returncode for a in answers] == [1, 1], answers[0].stdout  # the whole history is illegal
    assert answers[0].stdout == answers[1].stdout and "ILLEGAL" in answers[0].stdout


def _retained() -> int:
    """Every object the collector tracks, plus the entries of every list, dict, set and deque:
    what a structure growing batch by batch would add to, however small its entries."""
    import gc
    from collections import deque

    gc.collect()
    tracked = gc.get_objects()
    return len(tracked) + sum(len(o) for o in tracked if isinstance(o, (dict, list, set, deque)))


def test_a_segmented_campaign_retains_as_much_after_4n_batches_as_after_n(tmp_path: Path) -> None:
    from simulations.campaign import HistoryCheck
    from simulations.targets import EmbeddedTarget

    import gc

    def alive() -> tuple[int, ...]:
        objects = gc.get_objects()
        return tuple(sum(isinstance(o, t) for o in objects) for t in (EmbeddedTarget, HistoryCheck))

    def measured(segment_batches: int) -> tuple[int, int, int]:
        sizes: dict[int, int] = {}
        live = 0
        gc.collect()
        before = alive()  # what earlier tests in this process still hold is not this run's

        def on_batch(_elapsed: float, _operations: int) -> None:
            nonlocal live
            sizes[len(sizes) + 1] = _retained() if len(sizes) + 1 in (40, 160) else 0
            if len(sizes) == 160:
                live = max(now - then for now, then in zip(alive(), before))

        run_campaign(seed=1, max_batches=160, budget_s=300, history_file=tmp_path / f"{segment_batches}.jsonl",
                     segment_batches=segment_batches, on_batch=on_batch)
        return sizes[40], sizes[160], live

    # Measured at the same point of a segment (its last batch), so both hold one whole segment.
    at_n, at_4n, live = measured(20)
    whole_n, whole_4n, _ = measured(0)
    assert whole_4n - whole_n > 0  # one segment: what its checks and the reference keep grows
    assert (at_4n - at_n) * 20 < whole_4n - whole_n, (at_n, at_4n, whole_n, whole_4n)
    assert live == 1  # the segments let go are gone: one target, one check
